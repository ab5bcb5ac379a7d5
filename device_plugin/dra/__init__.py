"""The Dynamic Resource Allocation (DRA) side of the daemon: a second kubelet API beside the device plugin.

Modules, one job each:
- partitions: the node's GPUs split into best K-sets by the allocator's objective, and the listing order.
- inventory: NVML facts of one node as DRA devices (names and attributes NVIDIA's DRA driver uses).
- slices: the ResourceSlice objects of one node's pool, in the shape of a chosen resource.k8s.io version.
- checkpoint, prepare, grpc_service: the kubelet side (registration, NodePrepareResources & co.).
- NOT BUILT YET: the API-server side (a `kubernetes`-client ResourceClaim reader, the ResourceSlice
  publisher) and the `dra serve` loop that ties them to the shared NVML/health machinery.

Only this package (and the kubelet stand-ins) may import grpc, the generated api and `kubernetes`.
"""
