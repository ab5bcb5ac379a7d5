"""The DRA checkpoint: which claims this node prepared, and with which devices, kept across
restarts.

Modules, one job each: store (the Checkpoint callers use: get, put, remove, uids), values (what is
recorded of a prepared claim), format (an entry's encoding and file name), files (the claims folder:
writes, renames, fsyncs), commit (claim files written as a group, made durable at once), journal
(the records of changes not yet folded into files), group_commit (callers batched into one journal
write), load (reading the folder back at start, leftovers set aside).
"""
