"""One node's runtime: the resources built from config and hardware, served, health-watched, re-served.

composition (NVML + config -> the Node: resources, GPUs, MIG inventory, Allocator), daemon (serving,
rescans and config reloads), health_routing (health transitions -> resources -> metrics), reporting
(metrics, probes and node labels of what is served).
"""
