"""MIG: discovery over the NVML boundary, NVIDIA-compatible strategies, allocation policy, re-discovery.

Boundary: value types only (device_plugin.devices, ids, errors, allocation_policy, nvml.types,
nvml.mig_types); never grpc, api or pynvml. Backends are reached through the small MigBackend protocol.
"""
