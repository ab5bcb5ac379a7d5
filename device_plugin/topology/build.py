"""Build the Topology value from an NvmlBackend (real or fake), once, at start-up.

The NVLink fabric is read into a networkx graph: one node per GPU (`("gpu", index)`) and one per
NVSwitch (`("nvswitch", bus_id)`), edges weighted by active link count. From it, per GPU pair:
- direct NVLinks: the weight of the GPU-GPU edge (the smaller of the two ends' counts, should a
  driver report them asymmetrically; NVIDIA's allocator panics there, we take the safe side);
- NVLinks through NVSwitch: the switches both GPUs reach; each GPU's links into those switches are
  counted and the pair gets the smaller count (the slower end limits the pair);
- PCIe common ancestor from the backend, NUMA from GpuInfo.
PCIe paths: when the backend is also a NicSource (FakeNvml, RealNvml), the hardware layer hands up each
GPU's path (the description's, or sysfs's on a real node); the Topology keeps them and derives each
GPU's PCIe root from them. GPU-NIC levels rank each GPU's path and each NIC's by
device_plugin.nvml.pcie_paths.pcie_level_of_paths, the rule the fake uses for GPU pairs. A GPU whose path
is unknown gets just its socket, so it is NODE or SYS from every NIC. On a real node GPU-GPU levels are
NVML's; tools/pcie_level_check.py shows where NVML and the path rule disagree.
Links that are inactive, or whose far end is neither a GPU of this node nor an NVSwitch, are ignored.
Beyond the node: each GPU's NVLink fabric registration (clique) as the backend reports it.
"""

from __future__ import annotations

import logging

import networkx as nx

from device_plugin.nvml.pcie_paths import pcie_level_of_paths, socket_name
from device_plugin.nvml.protocol import NicSource, NvmlBackend
from device_plugin.nvml.types import GpuInfo, PcieLevel, normalise_pci_bus_id
from device_plugin.topology.facts import FALLBACK_NVLINK_PER_LINK_GBPS, nvlink_per_link_gbps, pcie_p2p_gbps
from device_plugin.topology.model import PairLink, Topology

log = logging.getLogger(__name__)


def nvlink_graph(backend: NvmlBackend, gpus: tuple[GpuInfo, ...]) -> nx.Graph:
    """GPUs and NVSwitches as nodes, active NVLink counts as edge weights (per end, see module doc)."""
    graph = nx.Graph()
    by_bus = {normalise_pci_bus_id(gpu.pci_bus_id): gpu.index for gpu in gpus}
    for gpu in gpus:
        graph.add_node(("gpu", gpu.index))
    for gpu in gpus:
        counts: dict[tuple[str, object], int] = {}
        for link in backend.nvlinks(gpu.index):
            if not link.active:
                continue
            remote = normalise_pci_bus_id(link.remote_pci_bus_id)
            if link.remote_is_nvswitch:
                node: tuple[str, object] = ("nvswitch", remote)
            elif remote in by_bus and by_bus[remote] != gpu.index:
                node = ("gpu", by_bus[remote])
            else:
                continue
            counts[node] = counts.get(node, 0) + 1
        for node, count in counts.items():
            ends = graph.get_edge_data(("gpu", gpu.index), node, default={}).get("ends", {})
            graph.add_edge(("gpu", gpu.index), node, ends={**ends, gpu.index: count})
    return graph


def _nvlinks_between(graph: nx.Graph, a: int, b: int) -> tuple[int, bool]:
    """(link count, through NVSwitch?) for GPUs a and b."""
    node_a, node_b = ("gpu", a), ("gpu", b)
    direct = 0
    if graph.has_edge(node_a, node_b):
        ends = graph.edges[node_a, node_b]["ends"]
        direct = min(ends.get(a, 0), ends.get(b, 0))
    switches_a = {n for n in graph.neighbors(node_a) if n[0] == "nvswitch"}
    shared = switches_a & {n for n in graph.neighbors(node_b) if n[0] == "nvswitch"}
    through = 0
    if shared:
        links_a = sum(graph.edges[node_a, s]["ends"][a] for s in shared)
        links_b = sum(graph.edges[node_b, s]["ends"][b] for s in shared)
        through = min(links_a, links_b)
    return direct + through, through > 0


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


def gpu_pcie_paths(backend: NvmlBackend, gpus: tuple[GpuInfo, ...]) -> tuple[tuple[str, ...] | None, ...]:
    """Each GPU's PCIe path from the hardware layer (None where unknown); empty for a backend without paths."""
    if not isinstance(backend, NicSource):
        return ()
    return tuple(backend.pcie_path(gpu.pci_bus_id) for gpu in gpus)


def nic_levels(
    backend: NvmlBackend, gpus: tuple[GpuInfo, ...], paths: tuple[tuple[str, ...] | None, ...]
) -> tuple[tuple[str, ...], tuple[tuple[PcieLevel, ...], ...]]:
    """(NIC names, levels[gpu][nic]); both empty when the backend lists no NICs or is no NicSource."""
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
    graph = nvlink_graph(backend, gpus)
    linked = {n[1] for n in graph.nodes if n[0] == "gpu" and graph.degree(n) > 0}
    per_link = {gpu.index: _per_link_gbps(gpu) for gpu in gpus if gpu.index in linked}
    n = len(gpus)
    rows: list[list[PairLink | None]] = [[None] * n for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            links, via_switch = _nvlinks_between(graph, a, b)
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
        nvswitch_seen=any(node[0] == "nvswitch" for node in graph.nodes),
        gpu_fabric=tuple(backend.fabric_info(gpu.index) for gpu in gpus),
    )
