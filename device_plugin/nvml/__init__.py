"""The hardware boundary: the NvmlBackend protocol, its value types, the real and fake backends.

Only device_plugin.nvml.real imports pynvml. Everything above this package sees value types only.
"""
