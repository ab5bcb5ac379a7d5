"""Process utilities for the console script and `run`: signal handling and off-thread log output.

Nothing here knows the plugin: signals turns SIGTERM/SIGINT/SIGHUP into waits and callbacks with a
hard exit deadline; log_writer moves log output off the RPC path; gc_pauses keeps full garbage
collections short once start-up is done.
"""
