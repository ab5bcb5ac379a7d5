"""The real backend: NVML through pynvml, the only code that imports it (tests/test_layering.py
keeps it so).

Modules: backend (RealNvml: the NvmlBackend protocol over pynvml, every call's error with context),
health (the event watch and probes), mig (MIG devices and profiles), fabric (NVLink fabric state).
"""
