"""The DRA checkpoint: which claims this node prepared, and with which devices, kept across
restarts.

Modules: store (the Checkpoint callers use: get, put, remove, uids), format (an entry's encoding and
file name), files (the claims folder: writes, renames, fsyncs), commit (a group of changes made
durable at once), journal (the records of changes not yet folded into files, committed in batches),
load (reading the folder back at start, leftovers set aside).
"""
