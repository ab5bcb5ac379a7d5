"""Composition: a NodeInventory and the effective config become the device-plugin ResourceManagers
to serve.

- Whole GPUs are `nvidia.com/gpu` devices (ID = UUID, NUMA node from the backend), chosen by the
  topology-aware TopologyPolicy (the inventory's Allocator: node/inventory.py builds it once per
  Topology).
- MIG devices follow flags.migStrategy (mig/): spread or packed over parent GPUs, the parents chosen
  by the same Allocator.
- `resources` serves GPUs and MIG devices under per-model names (allocation/resource_naming.py).
- `sharing.timeSlicing` turns GPUs into replicas (timeslice/), whose physical GPUs are chosen by the
  same Allocator.
- Allocate answers follow flags.plugin (device-list strategy, ID strategy, passDeviceSpecs) and
  carry the node's `imex.channelIDs` channels (allocation/imex.py).
- envvar_conflicts(): what the kubelet will do wrong with the composed resources (two of them in one
  container under `envvar` alone), as warnings for the front-end to log.
No gRPC here: the device-plugin front-end (dp/front_end.py) serves what this returns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from device_plugin.allocation.imex import node_imex_channels, resolve_imex_channels
from device_plugin.allocation.protocols import AllocationPolicy, ResponseBuilder
from device_plugin.allocation.resource_naming import rename_resources
from device_plugin.allocation.resources import ResourceManager
from device_plugin.allocation.response_builders import (
    StrategyResponseBuilder,
    response_settings,
    scan_device_nodes,
)
from device_plugin.allocation.whole_gpu_selection import TopologyPolicy, require_whole_gpus
from device_plugin.config.model import Config
from device_plugin.config.resource_names import parse_resource_naming
from device_plugin.config.sharing_model import Placement
from device_plugin.core.ids import parse_device_id
from device_plugin.gpu_sets import Allocator
from device_plugin.gpu_sets.decision import AllocationDecision
from device_plugin.mig.discovery import MigInventory
from device_plugin.mig.policy import MigAllocationPolicy
from device_plugin.mig.strategy import build_resources as mig_resources
from device_plugin.node.inventory import NodeInventory, scan_inventory
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.types import GpuInfo
from device_plugin.timeslice import (
    AdvertisedResources,
    ReplicaPolicy,
    ReplicaResponseBuilder,
    replica_memory_mib,
    resolve_sharing,
    share_resources,
)

log = logging.getLogger(__name__)

# (resource name, decision) -> None: the allocation-quality metric hooks in here.
ResourceDecisionHook = Callable[[str, AllocationDecision], None]


@dataclass(frozen=True)
class Node:
    """Everything the daemon serves for one node, plus what labels and metrics need to know of
    it."""

    resources: tuple[ResourceManager, ...]
    inventory: NodeInventory
    advertised: AdvertisedResources
    replica_memory_mib: Mapping[str, int] = field(default_factory=dict)

    @property
    def gpus(self) -> tuple[GpuInfo, ...]:
        return self.inventory.gpus

    @property
    def mig(self) -> MigInventory:
        return self.inventory.mig

    @property
    def allocator(self) -> Allocator | None:
        """None on a node without GPUs."""
        return self.inventory.allocator

    def layout(self) -> Mapping[str, tuple[tuple[str, int | None], ...]]:
        """Resource name -> (device ID, MIG slot or None) per device: what a rescan compares to
        decide whether to re-serve. The slot counts because the `index` ID strategy names MIG
        devices by it."""
        slots = {d.uuid: d.slot for devices in self.mig.devices_by_gpu.values() for d in devices}
        return {
            r.resource_name: tuple(
                (d.id, slots.get(parse_device_id(d.id).base)) for d in r.snapshot().devices
            )
            for r in self.resources
        }


def mig_indices(inventory: MigInventory) -> dict[str, tuple[int, int]]:
    """MIG UUID -> (parent NVML index, NVML MIG slot): the `index` ID strategy's "<gpu>:<slot>"."""
    return {
        device.uuid: (parent, device.slot)
        for parent, devices in inventory.devices_by_gpu.items()
        for device in devices
    }


def build_node(
    backend: NvmlBackend,
    config: Config,
    *,
    dev_root: Path = Path("/dev"),
    on_decision: ResourceDecisionHook | None = None,
    previous: Node | None = None,
) -> Node:
    """Scan the node and compose its resources. `previous`: the node being rebuilt; its Allocator
    (and precomputed tables) is reused when the topology has not changed, so a periodic rescan costs
    no precompute."""
    inventory = scan_inventory(backend, previous.inventory if previous is not None else None)
    return compose_node(
        backend,
        inventory,
        config,
        dev_root=dev_root,
        on_decision=on_decision,
        rescan=previous is not None,
    )


def compose_node(
    backend: NvmlBackend,
    inventory: NodeInventory,
    config: Config,
    *,
    dev_root: Path = Path("/dev"),
    on_decision: ResourceDecisionHook | None = None,
    rescan: bool = False,
) -> Node:
    """The resources `config` asks for over `inventory`. Raises PluginError (ConfigError) when the
    config cannot be served on these GPUs (say a `sharing` entry names one that is gone)."""
    # A rescan rebuilds every minute: its routine lines go to DEBUG.
    routine = logging.DEBUG if rescan else logging.INFO
    gpus = inventory.gpus
    # parsed at load; GPU indices and UUIDs checked here
    sharing = resolve_sharing(config.sharing, gpus)
    allocator, topology = inventory.allocator, inventory.topology
    if allocator is None or topology is None:
        log.warning("no GPUs found; nothing to serve")
        return Node((), inventory, share_resources({}, sharing))
    base = mig_resources(gpus, inventory.mig.devices_by_gpu, config.flags.mig_strategy)
    products = {gpu.index: gpu.name for gpu in gpus}
    profiles = {
        d.uuid: d.profile for devices in inventory.mig.devices_by_gpu.values() for d in devices
    }
    # `resources`: per-model names, NVIDIA's patterns
    naming = parse_resource_naming(config.resources)
    base = rename_resources(base, naming, product_of=products.__getitem__, mig_profile_of=profiles)
    advertised = share_resources(base, sharing)
    settings = response_settings(config.flags)
    for note in settings.notes():
        log.log(logging.DEBUG if rescan else logging.WARNING, "config: %s", note)
    # /dev/nvidia<minor>: the driver's minor number, which need not equal the NVML index.
    minors = (
        {gpu.index: backend.device_minor(gpu.index) for gpu in gpus}
        if settings.pass_device_specs
        else None
    )
    hints = topology.close_nic_names() if config.daemon.nic_hints else None
    present = node_imex_channels(backend, dev_root) if config.imex.channel_ids else frozenset()
    # ConfigError when required and missing
    imex = resolve_imex_channels(config.imex, present, quiet=rescan)
    nodes = scan_device_nodes(dev_root, minors)
    builder = StrategyResponseBuilder(settings, nodes, mig_indices(inventory.mig), hints, imex)
    mig_ids = set(mig_indices(inventory.mig))
    placement = config.flags.plugin.shared_devices_allocation_policy
    resources = []
    for name, devices in sorted(advertised.devices.items()):
        if not devices:
            log.warning("%s: no devices; not served", name)
            continue
        builder.check_devices(devices)
        # Decided here, once, and kept on the resource: the labels read ResourceManager.is_mig.
        is_mig = name not in advertised.shared and devices[0].id in mig_ids
        if is_mig:
            policy: AllocationPolicy = MigAllocationPolicy(
                Placement(placement), choose_gpus=allocator.allocate, resource_name=name
            )
            response: ResponseBuilder = builder
        else:
            policy, response = _policy_for(name, advertised, allocator, builder, on_decision)
        resources.append(ResourceManager(name, devices, policy, response, is_mig=is_mig))
        log.log(
            routine,
            "%s: %d devices on GPUs %s",
            name,
            len(devices),
            ", ".join(sorted({f"{d.gpu_indices[0]} (NUMA {d.numa_node})" for d in devices})),
        )
    memory_by_id = {gpu.uuid: gpu.memory_mib for gpu in gpus}
    memory_by_id.update(
        {d.uuid: d.memory_mib for ds in inventory.mig.devices_by_gpu.values() for d in ds}
    )
    memory = replica_memory_mib(advertised, memory_by_id)
    return Node(tuple(resources), inventory, advertised, memory)


def _policy_for(
    name: str,
    advertised: AdvertisedResources,
    allocator: Allocator,
    builder: StrategyResponseBuilder,
    on_decision: ResourceDecisionHook | None,
) -> tuple[AllocationPolicy, ResponseBuilder]:
    hook = None if on_decision is None else (lambda decision: on_decision(name, decision))
    topology_policy = TopologyPolicy(allocator, on_decision=hook, resource_name=name)
    shared = advertised.shared.get(name)
    if shared is None:
        # once here, so no request needs the check
        require_whole_gpus(name, advertised.devices[name])
        return topology_policy, builder

    return ReplicaPolicy.for_resource(
        shared, allocator.allocate
    ), ReplicaResponseBuilder.for_resource(shared, builder)


def envvar_conflicts(node: Node, config: Config) -> tuple[str, ...]:
    """A warning when one container could receive two of our resources under `deviceListStrategy:
    envvar` alone: each Allocate answer sets its own NVIDIA_VISIBLE_DEVICES, and the kubelet merges
    the answers' env maps, so one value wins at random and the container sees only part of its
    devices. volume-mounts (one mount per device) and CDI (per-resource annotation keys, or CDI
    device lists) merge instead."""
    if tuple(config.flags.plugin.device_list_strategy) != ("envvar",):
        return ()
    names = sorted(r.resource_name for r in node.resources)
    if len(names) < 2:
        return ()
    return (
        f"{len(names)} resources are served ({', '.join(names)}) with deviceListStrategy envvar "
        "alone: a container "
        "that requests two of them gets one NVIDIA_VISIBLE_DEVICES from each Allocate and the "
        "kubelet keeps one of "
        "them at random, so it sees only part of its devices. Set flags.plugin.deviceListStrategy "
        "(DEVICE_LIST_STRATEGY) to volume-mounts, cdi-cri or cdi-annotations, or never request two "
        "of them in one "
        "container",
    )
