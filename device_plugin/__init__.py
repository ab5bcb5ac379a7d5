"""gpu-device-plugin: a Kubernetes device plugin for NVIDIA GPUs.

Layers, top imports bottom (see README "Architecture"):
cli/demo -> lifecycle -> server, registration, kubelet_watch -> resources
-> allocator, health, topology -> devices, config, errors -> nvml -> api.
"""
