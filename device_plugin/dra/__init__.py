"""The Dynamic Resource Allocation (DRA) side of the daemon: a second kubelet API beside the device plugin.

Modules, one job each:
- partitions: the node's GPUs split into best K-sets by the allocator's objective, and the listing order.
- inventory: NVML facts of one node as DRA devices (names and attributes NVIDIA's DRA driver uses).
- slices: the ResourceSlice objects of one node's pool, in the shape of a chosen resource.k8s.io version.
- checkpoint, prepare, grpc_service, registration: the kubelet side (NodePrepareResources & co.).
- api_client, publisher: the API-server side (ResourceClaims read, ResourceSlices written).

Only this package (and the kubelet stand-ins) may import grpc, the generated api and `kubernetes`.
"""
