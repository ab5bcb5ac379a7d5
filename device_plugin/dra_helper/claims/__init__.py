"""The kubelet side of a claim: reading ResourceClaims and ordering the calls about each one.

Modules: claim (the value types, and a claim body read defensively: its allocation for one driver),
fetch (the ResourceClaim GET, awaited on the serving loop), exclusion (per-claim tickets, so a
claim's state moves the way the kubelet asked, and which claim holds which device), prepare (the
Preparer), cleanup (the checkpointed claims no longer this node's, at start).
"""
