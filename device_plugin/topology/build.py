"""Build the Topology value from an NvmlBackend (real or fake), once, at start-up.

The NVLink fabric is read as each GPU's active link count towards each far end, a GPU (`("gpu",
index)`)
or an NVSwitch (`("nvswitch", bus_id)`). From it, per GPU pair:
- direct NVLinks: the weight of the GPU-GPU edge (the smaller of the two ends' counts, should a
  driver report them asymmetrically; NVIDIA's allocator panics there, we take the safe side);
- NVLinks through NVSwitch: the switches both GPUs reach; each GPU's links into those switches are
  counted and the pair gets the smaller count (the slower end limits the pair);
- PCIe common ancestor from the backend, NUMA from GpuInfo.
PCIe paths: when the backend is also a NicSource (FakeNvml, RealNvml), the hardware layer hands up
each GPU's path (the description's, or sysfs's on a real node); the Topology keeps them and derives
each GPU's PCIe root from them. GPU-NIC levels rank each GPU's path and each NIC's by
device_plugin.nvml.pcie_paths.pcie_level_of_paths, the rule the fake uses for GPU pairs. A GPU whose
path is unknown gets just its socket, so it is NODE or SYS from every NIC. On a real node GPU-GPU
levels are NVML's; tools/pcie_level_check.py shows where NVML and the path rule disagree.
Links that are inactive, or whose far end is neither a GPU of this node nor an NVSwitch, are
ignored. Beyond the node: each GPU's NVLink fabric registration (clique) as the backend reports it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from device_plugin.nvml.pcie_paths import pcie_level_of_paths, socket_name
from device_plugin.nvml.protocol import NicSource, NvmlBackend
from device_plugin.nvml.types import GpuInfo, PcieLevel, normalise_pci_bus_id
from device_plugin.topology.facts import (
    FALLBACK_NVLINK_PER_LINK_GBPS,
    nvlink_per_link_gbps,
    pcie_p2p_gbps,
)
from device_plugin.topology.model import PairLink, Topology

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NvlinkEnds:
    """Active NVLinks as each GPU counts them (per end, see module doc): towards each other GPU of
    this node (`to_gpu[a][b]`) and towards each NVSwitch, by its normalised PCI bus ID
    (`to_switch[a][bus]`)."""

    to_gpu: dict[int, dict[int, int]]
    to_switch: dict[int, dict[str, int]]

    def linked(self) -> set[int]:
        """GPUs with any NVLink: those that count one, and those another GPU counts one towards."""
        linked = {a for a in self.to_gpu if self.to_gpu[a] or self.to_switch[a]}
        linked.update(b for counts in self.to_gpu.values() for b in counts)
        return linked

    def between(self, a: int, b: int) -> tuple[int, bool]:
        """(link count, through NVSwitch?) for GPUs a and b."""
        direct = min(self.to_gpu[a].get(b, 0), self.to_gpu[b].get(a, 0))
        shared = self.to_switch[a].keys() & self.to_switch[b].keys()
        through = 0
        if shared:
            through = min(
                sum(self.to_switch[a][s] for s in shared), sum(self.to_switch[b][s] for s in shared)
            )
        return direct + through, through > 0


def nvlink_ends(backend: NvmlBackend, gpus: tuple[GpuInfo, ...]) -> NvlinkEnds:
    """Every GPU's active NVLinks, counted by far end; links to anything else are ignored."""
    by_bus = {normalise_pci_bus_id(gpu.pci_bus_id): gpu.index for gpu in gpus}
    to_gpu: dict[int, dict[int, int]] = {}
    to_switch: dict[int, dict[str, int]] = {}
    for gpu in gpus:
        gpu_counts, switch_counts = (
            to_gpu.setdefault(gpu.index, {}),
            to_switch.setdefault(gpu.index, {}),
        )
        for link in backend.nvlinks(gpu.index):
            if not link.active:
                continue
            remote = normalise_pci_bus_id(link.remote_pci_bus_id)
            if link.remote_is_nvswitch:
                switch_counts[remote] = switch_counts.get(remote, 0) + 1
            elif remote in by_bus and by_bus[remote] != gpu.index:
                gpu_counts[by_bus[remote]] = gpu_counts.get(by_bus[remote], 0) + 1
    return NvlinkEnds(to_gpu, to_switch)


def _per_link_gbps(gpu: GpuInfo) -> float:
    gbps = nvlink_per_link_gbps(gpu.name)
    if gbps is None:
        log.warning(
            "GPU %d (%s): NVLink generation unknown, assuming %.0f GB/s per link",
            gpu.index,
            gpu.name,
            FALLBACK_NVLINK_PER_LINK_GBPS,
        )
        return FALLBACK_NVLINK_PER_LINK_GBPS
    return gbps


def gpu_pcie_paths(
    backend: NvmlBackend, gpus: tuple[GpuInfo, ...]
) -> tuple[tuple[str, ...] | None, ...]:
    """Each GPU's PCIe path from the hardware layer (None where unknown); empty for a backend
    without paths."""
    if not isinstance(backend, NicSource):
        return ()
    return tuple(backend.pcie_path(gpu.pci_bus_id) for gpu in gpus)


def nic_levels(
    backend: NvmlBackend, gpus: tuple[GpuInfo, ...], paths: tuple[tuple[str, ...] | None, ...]
) -> tuple[tuple[str, ...], tuple[tuple[PcieLevel, ...], ...]]:
    """(NIC names, levels[gpu][nic]); both empty when the backend lists no NICs or is no
    NicSource."""
    if not isinstance(backend, NicSource):
        return (), ()
    nics = backend.nics()
    if not nics:
        return (), ()
    rows = []
    for gpu, path in zip(gpus, paths, strict=True):
        known = path or (socket_name(gpu.numa_node),)
        rows.append(tuple(pcie_level_of_paths(known, nic.pcie_path) for nic in nics))
    return tuple(nic.name for nic in nics), tuple(rows)


def build_topology(backend: NvmlBackend) -> Topology:
    """The Topology of the machine behind `backend`; NVML errors propagate as NvmlError."""
    gpus = backend.gpus()
    ends = nvlink_ends(backend, gpus)
    linked = ends.linked()
    per_link = {gpu.index: _per_link_gbps(gpu) for gpu in gpus if gpu.index in linked}
    n = len(gpus)
    rows: list[list[PairLink | None]] = [[None] * n for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            links, via_switch = ends.between(a, b)
            level = backend.pcie_level(a, b)
            numa_a, numa_b = gpus[a].numa_node, gpus[b].numa_node
            bandwidth = links * min(per_link[a], per_link[b]) if links else pcie_p2p_gbps(level)
            pair = PairLink(
                nvlinks=links,
                via_nvswitch=via_switch,
                pcie_level=level,
                same_numa=numa_a is not None and numa_a == numa_b,
                bandwidth_gbps=bandwidth,
            )
            rows[a][b] = rows[b][a] = pair
    paths = gpu_pcie_paths(backend, gpus)
    names, levels = nic_levels(backend, gpus, paths or (None,) * n)
    return Topology(
        gpu_names=tuple(gpu.name for gpu in gpus),
        numa_nodes=tuple(gpu.numa_node for gpu in gpus),
        links=tuple(tuple(row) for row in rows),
        nic_names=names,
        nic_levels=levels,
        gpu_pcie_paths=paths,
        nvswitch_seen=any(ends.to_switch.values()),
        gpu_fabric=tuple(backend.fabric_info(gpu.index) for gpu in gpus),
    )
