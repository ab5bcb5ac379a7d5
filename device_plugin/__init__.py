"""gpu-device-plugin: a Kubernetes device plugin for NVIDIA GPUs.

The layers, what each holds and how requests travel through them: docs/architecture.md.
tests/test_layering.py enforces the same order.
"""
