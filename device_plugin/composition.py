"""Composition root: an NVML backend and the effective config become the ResourceManagers to serve.

- Whole GPUs are `nvidia.com/gpu` devices (ID = UUID, NUMA node from the backend), chosen by the
  topology-aware TopologyPolicy (one Allocator per node, its tables built once here).
- `sharing.timeSlicing` turns GPUs into replicas (timeslice/), whose physical GPUs are chosen by the
  same Allocator.
- Allocate answers follow flags.plugin (device-list strategy, ID strategy, passDeviceSpecs).
Config values whose feature is not built are refused here with a ConfigError naming the field.
No gRPC here: lifecycle serves what this returns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from device_plugin.allocation_policy import AllocationPolicy, ResponseBuilder
from device_plugin.allocator import Allocator
from device_plugin.allocator.decision import AllocationDecision
from device_plugin.config import Config
from device_plugin.devices import Device
from device_plugin.errors import ConfigError
from device_plugin.gpu_policy import TopologyPolicy
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.types import GpuInfo
from device_plugin.resources import ResourceManager
from device_plugin.response_builders import StrategyResponseBuilder, response_settings, scan_device_nodes
from device_plugin.topology_build import build_topology
from timeslice import (
    AdvertisedResources,
    ReplicaPolicy,
    ReplicaResponseBuilder,
    parse_sharing,
    replica_memory_mib,
    share_resources,
)

log = logging.getLogger(__name__)

GPU_RESOURCE = "nvidia.com/gpu"

# (resource name, decision) -> None: the allocation-quality metric hooks in here.
ResourceDecisionHook = Callable[[str, AllocationDecision], None]


@dataclass(frozen=True)
class Node:
    """Everything the daemon serves for one node, plus what labels and metrics need to know of it."""

    resources: tuple[ResourceManager, ...]
    gpus: tuple[GpuInfo, ...]
    advertised: AdvertisedResources
    replica_memory_mib: Mapping[str, int] = field(default_factory=dict)


def check_supported(config: Config) -> None:
    """Refuse settings this build cannot honour (the error says which field and what works)."""
    flags = config.flags
    if flags.mig_strategy != "none":
        raise ConfigError("flags.migStrategy", f"{flags.mig_strategy!r} is not supported yet; use 'none'")


def gpu_devices(gpus: tuple[GpuInfo, ...]) -> list[Device]:
    return [Device(id=gpu.uuid, gpu_indices=(gpu.index,), numa_node=gpu.numa_node) for gpu in gpus]


def build_node(
    backend: NvmlBackend,
    config: Config,
    *,
    dev_root: Path = Path("/dev"),
    on_decision: ResourceDecisionHook | None = None,
) -> Node:
    check_supported(config)
    if config.resources:
        log.warning("config 'resources' (custom resource names) is accepted but not applied; serving defaults")
    gpus = backend.gpus()
    sharing = parse_sharing(config.sharing or None, gpus=gpus)
    if not gpus:
        log.warning("no GPUs found; nothing to serve")
        return Node((), gpus, share_resources({}, sharing))
    allocator = Allocator(build_topology(backend))
    advertised = share_resources({GPU_RESOURCE: tuple(gpu_devices(gpus))}, sharing)
    settings = response_settings(config.flags)
    for note in settings.notes():
        log.warning("config: %s", note)
    builder = StrategyResponseBuilder(settings, scan_device_nodes(dev_root))
    resources = []
    for name, devices in sorted(advertised.devices.items()):
        builder.check_devices(devices)
        policy, response = _policy_for(name, advertised, allocator, builder, on_decision)
        resources.append(ResourceManager(name, devices, policy, response))
        log.info(
            "%s: %d devices on GPUs %s",
            name,
            len(devices),
            ", ".join(sorted({f"{d.gpu_indices[0]} (NUMA {d.numa_node})" for d in devices})),
        )
    memory = replica_memory_mib(advertised, {gpu.uuid: gpu.memory_mib for gpu in gpus})
    return Node(tuple(resources), gpus, advertised, memory)


def _policy_for(
    name: str,
    advertised: AdvertisedResources,
    allocator: Allocator,
    builder: StrategyResponseBuilder,
    on_decision: ResourceDecisionHook | None,
) -> tuple[AllocationPolicy, ResponseBuilder]:
    hook = None if on_decision is None else (lambda decision: on_decision(name, decision))
    topology_policy = TopologyPolicy(allocator, on_decision=hook)
    shared = advertised.shared.get(name)
    if shared is None:
        return topology_policy, builder

    def choose_gpus(candidates: tuple[int, ...], must: tuple[int, ...], count: int) -> tuple[int, ...]:
        return allocator.allocate(candidates, must, count)

    return ReplicaPolicy.for_resource(shared, choose_gpus), ReplicaResponseBuilder.for_resource(shared, builder)


def build_resources(backend: NvmlBackend, config: Config, *, dev_root: Path = Path("/dev")) -> list[ResourceManager]:
    """The ResourceManagers alone (tests and the demo)."""
    return list(build_node(backend, config, dev_root=dev_root).resources)
