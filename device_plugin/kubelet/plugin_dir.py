"""Our sockets' names in the kubelet's device-plugin directory.

Boundary: names only. The file operations on them (a private 0600 bind, identities, cleanup) are the
same in both modes and live in device_plugin.serving.socket_files.
"""

from __future__ import annotations


def socket_name(resource_name: str) -> str:
    """`nvidia.com/gpu` -> `nvidia-gpu.sock` (NVIDIA's naming, so operators find it where they expect)."""
    vendor, _, name = resource_name.partition("/")
    return f"{vendor.split('.')[0]}-{name}.sock"
