"""The DRA driver: what is ours in a DRA driver for NVIDIA GPUs, built on the kubelet-plugin helper.

Modules, one job each:
- partitions: the node's GPUs split into best K-sets by the allocator's objective, and the listing
  order.
- ranked_sets, covering_sets: groupings of K-sets of one score each (rankedSetK A-F) that together
  cover every GPU, so first fit finds a best set.
- single_order: the one-GPU ranks (singleGPURank), static and for the GPUs in use.
- occupancy, hint_thread: the values that follow the GPUs in use after each Prepare and Unprepare,
  and the thread that recomputes them off the prepare path.
- inventory: the node's inventory as DRA devices (names and attributes NVIDIA's DRA driver uses, the
  nearest RDMA NIC of each GPU among them).
- taints: an unhealthy GPU's device taint (KEP-5055), from the runtime's typed health transition.
- prepare_decision: the helper's Driver protocol: a claim's CDI devices from its allocation, or why
  not, with the opaque configs a claim addresses to this driver accepted or refused per claim.
- memory_shares: whole GPUs published as shareable by memory and compute, a share read from its
  result, and the listing order that packs shares best-fit.
- mps/: per-process isolation of shares (an MPS control daemon per shared GPU, each share's CDI
  spec).
- start_settings: the kubelet directory and the instance (rolling-update mode) read from the config
  at start.
- front_end_start: what `run --mode dra` checks and builds at start (node name, socket paths, API
  client).
- front_end: the DRA front-end of the node runtime (device_plugin/node/runtime.py), which `run
  --mode dra` serves; it wires the helper (dra_helper/: the gRPC services, the Preparer, the
  SlicePublisher, the devices' health feed) to our devices. The runtime shares its health watch,
  rescans, config reloads, metrics, probes and node labels with the device-plugin mode.

The generic half (registration, the DRA and health services, claim reads, slice publishing and
watching, the checkpoint) is device_plugin/dra_helper/; the API-server and kubelet stand-ins are
device_plugin/standins/, which this package may not import.
"""
