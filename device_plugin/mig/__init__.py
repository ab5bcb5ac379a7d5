"""MIG: discovery over the NVML boundary, NVIDIA-compatible strategies, allocation policy, the
topology tree.

Boundary: value types only (device_plugin.core.devices, ids, errors, allocation_policy, nvml.types,
nvml.mig_types); never grpc, api or pynvml. Backends are reached through the small MigBackend
protocol. Re-discovery (periodic, SIGHUP) is the daemon's: it rebuilds through these and re-serves
what changed.
"""
