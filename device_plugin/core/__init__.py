"""Value types and helpers every layer uses, importing nothing of ours above them.

devices (a device, its health, a container's allocation), ids (device ID parsing and formatting),
gpu_models (facts per GPU model), errors (the project's error hierarchy), short_text (bounded
message text). Nothing here does I/O.
"""
