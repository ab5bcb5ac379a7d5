"""The kubelet side of a claim: reading ResourceClaims and ordering the calls about each one.

Modules: fetch (the ResourceClaim GET, awaited on the serving loop), body (a claim body read defensively:
its allocation for one driver), locks (per-claim tickets: a claim's state moves the way the kubelet asked).
"""
