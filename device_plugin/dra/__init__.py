"""The Dynamic Resource Allocation (DRA) side of the daemon: a second kubelet API beside the device plugin.

Modules, one job each:
- partitions: the node's GPUs split into best K-sets by the allocator's objective, and the listing order.
- inventory: NVML facts of one node as DRA devices (names and attributes NVIDIA's DRA driver uses).
- slices: the ResourceSlice objects of one node's pool, in the shape of a chosen resource.k8s.io version.
- checkpoint, prepare, grpc_service: the kubelet side (registration, NodePrepareResources & co.).
- kube, publisher: the API-server side through the `kubernetes` client (version discovery, the
  ResourceClaim reader, the ResourceSlice publisher with its retry thread).
- driver, serve: the running driver (NVML + health -> slices; kubelet sockets) and `run --mode dra`.
- NOT BUILT YET: NIC attributes, metrics/labels in DRA mode, the kubelet's device-health service.

Only this package (and the kubelet stand-ins) may import grpc, the generated api and `kubernetes`.
"""
