"""The kubelet-plugin helper: the generic half of a DRA driver, the part every kubelet plugin needs alike.

Sub-packages, one job each:
- checkpoint: the prepared claims on disk (one file a claim, a journal, a commit queue), read back at start.
- api: the API-server side: the pool's ResourceSlices built, published, kept current and watched.
- claims: the ResourceClaim reads, a claim body read defensively, and the per-claim ordering of calls.

Boundary: knows no GPU; the driver (device_plugin/dra/) supplies what is ours.
"""
