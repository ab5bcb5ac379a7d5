"""One node's GPUs and MIG devices as DRA devices: names, attributes and capacities, in listing
order.

Boundary: reads a NodeInventory (GPUs, MIG devices, Topology and its Allocator: node/inventory.py)
and the backend's per-device facts (driver version, minor numbers), calls partitions; returns frozen
values (no Kubernetes objects: `slices` shapes those). The running driver builds its devices from
the runtime's cached inventory (inventory_devices); `build_devices` reads a backend and a Topology
afresh (`dra slices`). Names follow NVIDIA's DRA driver so that DeviceClasses and claims written for
it keep working: a whole GPU is `gpu-<minor>`, a MIG device `gpu-<parent minor>-mig-<GI profile,
dots dropped>-<GI profile id>-<placement start>` (NVIDIA's scheme from v25.12, e.g.
`gpu-0-mig-1g10gb-19-0`). The name earlier releases gave a MIG device (NVIDIA's before v25.12:
`gpu-<minor>-mig-<GI profile id>-<placement start>-<placement size>`) is kept as a former name:
never published, but a claim allocated under it before an upgrade is still prepared as the same
device (docs/dra.md, names old to new). A GPU in MIG mode is published only through its MIG devices
(as NVIDIA's driver does), and stays out of the partitions.

Attribute names without a domain are the driver's own and mean what NVIDIA's driver means by them
(docs/dra.md lists them); the Kubernetes standard attributes live under resource.kubernetes.io.
Ours, which NVIDIA's driver does not define or defines differently (its `partitionK` are Fabric
Manager partitions), are qualified by the configured own domain (OWN_ATTRIBUTES, `own_domain` below:
gpuDevicePlugin.ownDomain). docs/dra.md repeats that table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from device_plugin.core.gpu_models import model_facts
from device_plugin.core.names import OWN_DOMAIN, own_name
from device_plugin.dra.partitions import Partitions, compute_partitions
from device_plugin.dra.ranked_sets import (
    GROUPINGS,
    LETTERS,
    RANKED_SIZES,
    ranked_groupings,
    ranked_values,
)
from device_plugin.dra.single_order import RANK_ATTRIBUTE, WHOLE_GPU, single_gpu_order
from device_plugin.dra_helper.api.devices import Attribute, DeviceTaint, RequestPolicy
from device_plugin.gpu_sets import Allocator
from device_plugin.mig.discovery import discover
from device_plugin.node.inventory import NodeInventory
from device_plugin.nvml.mig_profiles import profile_table
from device_plugin.nvml.mig_types import MigDevice
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.types import GpuInfo
from device_plugin.topology.model import Topology

STANDARD = "resource.kubernetes.io/"
# Ours, under the own domain (`<ownDomain>/<name>`).
OWN_ATTRIBUTES = {
    "bestSet4": "greedy best 4-sets; equal values = one of this node's best 4-sets, numbered in "
    "listing order",
    "bestSet8": "greedy best 8-sets",
    "bestSet16": "greedy best 16-sets",
    **{
        f"rankedSet{k}{letter}": f"{k}-sets, grouping {letter}: equal values = one set; the first "
        "grouping with a "
        "whole group free gives a set optimal among the free GPUs up to 8 GPUs, else A's score >= "
        "B's >= ... "
        "(ranked_sets.py)"
        for k in RANKED_SIZES
        for letter in LETTERS[: GROUPINGS[k]]
    },
    "singleGPURank": "the order one-GPU claims should take whole GPUs in: 0 first "
    "(single_order.py)",
    "nvlinkDomain": "GPU indices reachable over NVLink/NVSwitch, joined by '-'",
    "nearestNIC": "RDMA device name (e.g. mlx5_0) of the NIC nearest this GPU; only where NICs are "
    "seen",
    "clique": "NVLink clique <clusterUUID>.<cliqueID> the GPU is registered in "
    "(nvidia.com/gpu.clique's form); "
    "only where the fabric registration completed",
    "memoryIsolation": "what a share's memory limit is on this node (memoryShares on): none = "
    "bookkeeping only "
    "(memory_shares.py)",
}
HINTS_FULL, HINTS_SETS, HINTS_NONE = "full", "sets", "none"  # gpuDevicePlugin.placementHints
# bestSet2: no shipped claim reads it (rankedSet2A-D place pairs), so not published
PUBLISHED_BEST_SETS = (4, 8, 16)


@dataclass(frozen=True)
class DraDevice:
    name: str
    uuid: str
    gpu_index: int  # the GPU, or the MIG device's parent
    attributes: tuple[Attribute, ...]
    capacity: tuple[tuple[str, str], ...]  # (name, Kubernetes quantity)
    # its GPU's health (dra/taints.py); none while the GPU is Healthy
    taints: tuple[DeviceTaint, ...] = ()
    # memory shares (dra/memory_shares.py)
    request_policies: tuple[tuple[str, RequestPolicy], ...] = ()
    allow_multiple_allocations: bool = False  # a whole GPU with memoryShares on
    # names earlier releases published for it (never published now)
    former_names: tuple[str, ...] = ()


def semver(text: str, parts: int = 3) -> str:
    """ "535.161.08" -> "535.161.8", "12.2" -> "12.2.0": the form a DRA `version` attribute
    accepts."""
    numbers = [int(p) for p in text.strip().split(".") if p.strip().isdigit()]
    if not numbers:
        raise ValueError(f"{text!r} is not a dotted version")
    return ".".join(str(n) for n in (numbers + [0] * parts)[:parts])


def quantity_mib(mib: int) -> str:
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def nvlink_domain_text(topology: Topology, gpu: int) -> str:
    """The GPU's NVLink domain from the Topology as nvlinkDomain publishes it: indices joined by
    '-'."""
    return "-".join(str(g) for g in topology.nvlink_domain(gpu))


def nic_attributes(topology: Topology, gpu: int, domain: str = OWN_DOMAIN) -> list[Attribute]:
    """The GPU's nearest RDMA NIC; nothing on a node where no NIC is seen. (Its PCIe distance is the
    allocator's to weigh, and `resource.kubernetes.io/pcieRoot` is what a claim aligns a NIC
    with.)"""
    nearest = topology.nearest_nic(gpu)
    if nearest is None:
        return []
    return [(own_name(domain, "nearestNIC"), "string", topology.nic_names[nearest])]


def clique_attributes(topology: Topology, gpu: int, domain: str = OWN_DOMAIN) -> list[Attribute]:
    """The GPU's own NVLink clique (rack-scale NVLink systems); nothing unless its registration is
    attached."""
    clique = topology.gpu_clique(gpu)
    return [] if clique is None else [(own_name(domain, "clique"), "string", clique)]


def build_devices(
    backend: NvmlBackend,
    topology: Topology,
    *,
    exclude_uuids: Iterable[str] = (),
    own_domain: str = OWN_DOMAIN,
    hints: str = HINTS_FULL,
) -> tuple[tuple[DraDevice, ...], Partitions]:
    """Every device of the node read afresh, minus `exclude_uuids` (left out of the partitions
    too)."""
    mig = discover(backend)
    inventory = NodeInventory(mig.gpus, mig, topology, Allocator(topology) if mig.gpus else None)
    return inventory_devices(
        backend, inventory, exclude_uuids=exclude_uuids, own_domain=own_domain, hints=hints
    )


def inventory_devices(
    backend: NvmlBackend,
    inventory: NodeInventory,
    *,
    exclude_uuids: Iterable[str] = (),
    own_domain: str = OWN_DOMAIN,
    hints: str = HINTS_FULL,
) -> tuple[tuple[DraDevice, ...], Partitions]:
    """The inventory's devices, whole GPUs in partition order (over the inventory's own Allocator),
    then MIG devices by parent. `hints` (gpuDevicePlugin.placementHints): full, sets (no ranked
    groupings) or none (none of our own attributes); the listing order is the same for all three."""
    excluded = set(exclude_uuids)
    system = backend.system_info()
    gpus = {g.index: g for g in inventory.gpus}
    mig_gpus = inventory.mig_gpus
    whole = [i for i in gpus if i not in mig_gpus and gpus[i].uuid not in excluded]
    allocator, topology = inventory.allocator, inventory.topology
    if allocator is None or topology is None:  # no GPUs
        return (), Partitions({})
    partitions = compute_partitions(allocator, whole) if whole else Partitions({})
    listing = partitions.order(whole)
    partitions.ranked.update(
        (k, groupings)
        for k in RANKED_SIZES
        if (groupings := ranked_groupings(allocator, listing, k))
    )
    single_rank = {gpu: rank for rank, gpu in enumerate(single_gpu_order(allocator, listing))}
    common = _common_attributes(system.driver_version, system.cuda_driver_version)
    devices: list[DraDevice] = []
    for index in listing:
        gpu = gpus[index]
        attrs = [WHOLE_GPU, ("uuid", "string", gpu.uuid), *_gpu_attributes(backend, gpu, common)]
        attrs += _pci_attributes(gpu, topology)
        if hints != HINTS_NONE:
            attrs += [
                (own_name(own_domain, f"bestSet{k}"), "int", g)
                for k in sorted(partitions.groups)
                if k in PUBLISHED_BEST_SETS and (g := partitions.group_of(k, index)) is not None
            ]
            attrs.append((own_name(own_domain, RANK_ATTRIBUTE), "int", single_rank[index]))
            attrs.append(
                (
                    own_name(own_domain, "nvlinkDomain"),
                    "string",
                    nvlink_domain_text(topology, index),
                )
            )
            attrs += nic_attributes(topology, index, own_domain)
            attrs += clique_attributes(topology, index, own_domain)
        if hints == HINTS_FULL:
            attrs += [
                (own_name(own_domain, f"rankedSet{k}{LETTERS[grouping]}"), "int", group)
                for k in sorted(partitions.ranked)
                for grouping, group in ranked_values(partitions.ranked[k], index)
            ]
        name = f"gpu-{backend.device_minor(index)}"
        devices.append(
            DraDevice(
                name, gpu.uuid, index, tuple(attrs), (("memory", quantity_mib(gpu.memory_mib)),)
            )
        )
    for index in sorted(mig_gpus):
        gpu = gpus[index]
        for mig in inventory.mig.devices_by_gpu[index]:
            if mig.uuid not in excluded and gpu.uuid not in excluded:
                devices.append(_mig_device(backend, gpu, mig, common, topology))
    return tuple(devices), partitions


def _common_attributes(driver_version: str, cuda_version: str) -> list[Attribute]:
    out: list[Attribute] = [("driverVersion", "version", semver(driver_version))]
    if cuda_version:
        out.append(("cudaDriverVersion", "version", semver(cuda_version)))
    return out


def _gpu_attributes(backend: NvmlBackend, gpu: GpuInfo, common: list[Attribute]) -> list[Attribute]:
    attrs: list[Attribute] = [
        ("index", "int", gpu.index),
        ("minor", "int", backend.device_minor(gpu.index)),
        ("productName", "string", gpu.name),
    ]
    facts = model_facts(gpu.name)
    if facts is not None:  # unknown model: say nothing rather than guess
        attrs.append(("architecture", "string", facts.family.replace("-", " ").title()))
        attrs.append(
            ("cudaComputeCapability", "version", f"{facts.compute_major}.{facts.compute_minor}.0")
        )
    return attrs + common


def _pci_attributes(gpu: GpuInfo, topology: Topology) -> list[Attribute]:
    """Bus ID, and from the Topology the PCIe root and NUMA node, each only where it is known."""
    attrs: list[Attribute] = [(STANDARD + "pciBusID", "string", gpu.pci_bus_id)]
    root = topology.pcie_root(gpu.index)
    if root is not None:
        attrs.append((STANDARD + "pcieRoot", "string", root))
    numa = topology.numa_nodes[gpu.index]
    if numa is not None:
        attrs.append((STANDARD + "numaNode", "int", numa))
    return attrs


def _mig_device(
    backend: NvmlBackend,
    gpu: GpuInfo,
    mig: MigDevice,
    common: list[Attribute],
    topology: Topology,
) -> DraDevice:
    gi_profile = (
        mig.profile.split("c.", 1)[1]
        if mig.profile[0].isdigit() and "c." in mig.profile
        else mig.profile
    )
    table = profile_table(gpu.name)
    profile = table.profile(gi_profile) if table is not None else None
    profile_id = profile.profile_id if profile is not None else -1
    minor = backend.device_minor(gpu.index)
    name = f"gpu-{minor}-mig-{_label_of(gi_profile)}-{profile_id}-{mig.placement_start}"
    former = f"gpu-{minor}-mig-{profile_id}-{mig.placement_start}-{mig.placement_size}"
    attrs: list[Attribute] = [
        ("type", "string", "mig"),
        ("uuid", "string", mig.uuid),
        ("parentUUID", "string", gpu.uuid),
        ("profile", "string", mig.profile),
        *_gpu_attributes(backend, gpu, common),
        *_pci_attributes(gpu, topology),
    ]
    capacity = (("memory", quantity_mib(mig.memory_mib)),)
    return DraDevice(name, mig.uuid, gpu.index, tuple(attrs), capacity, former_names=(former,))


def _label_of(profile: str) -> str:
    """A MIG profile name as a part of a device name (a DNS label): "1g.10gb" -> "1g10gb",
    "1g.10gb+me" -> "1g10gb-me" (NVIDIA's rule: dots dropped, lower case, anything else not in
    [a-z0-9-] made a dash)."""
    return re.sub(r"[^a-z0-9-]", "-", profile.replace(".", "").lower()).strip("-")
