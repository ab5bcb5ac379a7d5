"""Resources composed the way the device-plugin front-end composes them, for tests that serve them directly.

build_resources: the ResourceManagers of a backend under a config (dp/composition.py's build_node);
gpu_devices: whole GPUs as device-plugin Devices (ID = UUID, NUMA node from the backend).
"""

from __future__ import annotations

from pathlib import Path

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.model import Config
from device_plugin.core.devices import Device
from device_plugin.dp.composition import build_node
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.types import GpuInfo


def build_resources(backend: NvmlBackend, config: Config, *, dev_root: Path = Path("/dev")) -> list[ResourceManager]:
    return list(build_node(backend, config, dev_root=dev_root).resources)


def gpu_devices(gpus: tuple[GpuInfo, ...]) -> list[Device]:
    return [Device(id=gpu.uuid, gpu_indices=(gpu.index,), numa_node=gpu.numa_node) for gpu in gpus]
