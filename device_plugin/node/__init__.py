"""One node's runtime, shared by both modes: the inventory scanned, served by a front-end,
health-watched.

inventory (NVML -> GPUs, MIG inventory, Topology, the Allocator kept across rescans), runtime
(start, rescans and config reloads), reloads (a reload sorted by the fields' classes),
health_routing (health transitions -> the front-end -> metrics), reporting (metrics, probes and node
labels), front_end (the protocol the two front-ends implement). Nothing here is of one mode only:
the device plugin's resources are composed in dp/composition.py (tests/test_layering.py keeps node/
off its request path).
"""
