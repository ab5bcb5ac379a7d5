"""dra_helper: the DRA kubelet-plugin helper, the generic half of a DRA driver, the part every DRA
driver needs alike (dp_helper/ is its device-plugin pair).

Sub-packages, one job each:
- checkpoint: the prepared claims on disk (one file a claim, a journal, a commit queue), read back
  at start.
- api: the API-server side: the pool's ResourceSlices built, published, kept current and watched.
- claims: the ResourceClaim reads, a claim body read defensively, the per-claim ordering of calls,
  exclusivity between claims and the generic steps of a prepare (the Preparer).
- service: the registration and DRA sockets and their gRPC services (DRAPlugin, DRAResourceHealth).
- driver: the one protocol the driver implements (a claim's devices, decided from its allocation).
- plugin: the helper as one object (DraHelper) behind one options struct (PluginOptions): built,
  probed, started and stopped for one driver on one node.

Boundary: knows no GPU; the driver (device_plugin/dra/) supplies what is ours.
"""
