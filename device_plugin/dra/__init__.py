"""The Dynamic Resource Allocation (DRA) side of the daemon: a second kubelet API beside the device plugin.

Modules, one job each:
- partitions: the node's GPUs split into best K-sets by the allocator's objective, and the listing order.
- ranked_sets: groupings of K-sets of one score each (rankedSetK A-D), so first fit finds a best set.
- inventory: the node's inventory as DRA devices (names and attributes NVIDIA's DRA driver uses, the
  nearest RDMA NIC of each GPU among them).
- slices: the ResourceSlice objects of one node's pool, in the shape of a chosen resource.k8s.io version.
- checkpoint, prepare, servicers, grpc_service: the kubelet side (registration, NodePrepareResources
  & co.; the sockets served and kept through device_plugin.serving).
- claim_body, claim_locks, device_holders, offload: what Prepare relies on (a claim body read
  defensively, per-claim locks and epochs, which claim holds which device, the worker pools).
- claim_config: the opaque configs a claim addresses to this driver, accepted or refused per claim.
- kube, publisher, slice_store, slice_watch: the API-server side through the `kubernetes` client (version
  discovery, the ResourceClaim reader, the ResourceSlice publisher with its retry thread, its HTTP calls
  that touch only our slices, and the watch that notices when others change them).
- front_end: the DRA front-end of the node runtime (device_plugin/node/runtime.py), which `run --mode dra`
  serves; the runtime shares its health watch, rescans, config reloads, metrics, probes and node labels
  with the device-plugin mode.
- taints, device_health, health_service: an unhealthy GPU's device taint (KEP-5055), and the devices'
  health streamed to the kubelet's DRAResourceHealth watchers (KEP-4680), both fed by the runtime's one
  health delivery through the front-end.

Only this package (and the kubelet stand-ins) may import grpc, the generated api and `kubernetes`.
"""
