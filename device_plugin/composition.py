"""Composition root: an NVML backend and the effective config become the ResourceManagers to serve.

Today: every physical GPU is one `nvidia.com/gpu` device (ID = UUID, NUMA node from the backend),
chosen with LowestIndexPolicy and answered with NVIDIA_VISIBLE_DEVICES. Config values whose feature
is not built yet are refused here with a ConfigError naming the field, never silently ignored.
No gRPC here: lifecycle serves what this returns.
"""

from __future__ import annotations

import logging

from device_plugin.allocation_policy import EnvVarResponseBuilder, LowestIndexPolicy
from device_plugin.config import Config
from device_plugin.devices import Device
from device_plugin.errors import ConfigError
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.resources import ResourceManager

log = logging.getLogger(__name__)

GPU_RESOURCE = "nvidia.com/gpu"


def check_supported(config: Config) -> None:
    """Refuse settings this build cannot honour yet (the error says which field and what works)."""
    flags = config.flags
    if flags.mig_strategy != "none":
        raise ConfigError("flags.migStrategy", f"{flags.mig_strategy!r} is not supported yet; use 'none'")
    if flags.plugin.device_list_strategy != ("envvar",):
        raise ConfigError(
            "flags.plugin.deviceListStrategy",
            f"{list(flags.plugin.device_list_strategy)} is not supported yet; use 'envvar'",
        )
    if flags.plugin.device_id_strategy != "uuid":
        raise ConfigError("flags.plugin.deviceIDStrategy", "'index' is not supported yet; use 'uuid'")
    if flags.plugin.pass_device_specs:
        raise ConfigError("flags.plugin.passDeviceSpecs", "true is not supported yet")
    if config.sharing:
        raise ConfigError("sharing", "time-slicing and MPS sharing are not supported yet")


def gpu_devices(backend: NvmlBackend) -> list[Device]:
    return [Device(id=gpu.uuid, gpu_indices=(gpu.index,), numa_node=gpu.numa_node) for gpu in backend.gpus()]


def build_resources(backend: NvmlBackend, config: Config) -> list[ResourceManager]:
    check_supported(config)
    if config.resources:
        log.warning("config 'resources' (custom resource names) is accepted but not applied; serving defaults")
    devices = gpu_devices(backend)
    if not devices:
        log.warning("no GPUs found; nothing to serve")
        return []
    log.info(
        "%s: %d GPUs: %s",
        GPU_RESOURCE,
        len(devices),
        ", ".join(f"{d.gpu_indices[0]}={d.id} (NUMA {d.numa_node})" for d in devices),
    )
    return [ResourceManager(GPU_RESOURCE, devices, LowestIndexPolicy(), EnvVarResponseBuilder())]
