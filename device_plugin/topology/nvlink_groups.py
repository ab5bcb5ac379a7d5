"""Summarise a node's NVLink fabric for labels: its kind and its largest fully connected group.

Boundary: pure function over GpuInfo and NvLinkInfo values. GPUs that reach the same NVSwitch are
all connected to each other (that is what the switch is for); direct links connect two GPUs. Links to
anything that is not one of our GPUs (a CPU, an unknown bus) are ignored.

kind: "nvswitch" when any active link ends on an NVSwitch; "none" without active GPU-GPU links;
"pairs" when the largest fully connected group is 2 (NVLink bridges); "mesh" when larger (DGX-1).
largest_group: size of the largest clique of the NVLink graph; 1 when no GPUs are NVLinked (a single
GPU is trivially its own group); 0 only for a node without GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from device_plugin.nvml.types import GpuInfo, NvLinkInfo, normalise_pci_bus_id


@dataclass(frozen=True)
class NvLinkSummary:
    kind: str  # none | pairs | mesh | nvswitch
    largest_group: int


def nvlink_summary(gpus: Sequence[GpuInfo], links: Mapping[int, Sequence[NvLinkInfo]]) -> NvLinkSummary:
    by_bus = {normalise_pci_bus_id(g.pci_bus_id): g.index for g in gpus}
    graph: nx.Graph = nx.Graph()
    graph.add_nodes_from(g.index for g in gpus)
    switch_members: dict[str, set[int]] = {}
    for gpu in gpus:
        for link in links.get(gpu.index, ()):
            if not link.active:
                continue
            remote = normalise_pci_bus_id(link.remote_pci_bus_id)
            if link.remote_is_nvswitch:
                switch_members.setdefault(remote, set()).add(gpu.index)
            elif remote in by_bus and by_bus[remote] != gpu.index:
                graph.add_edge(gpu.index, by_bus[remote])
    for members in switch_members.values():
        ordered = sorted(members)
        graph.add_edges_from((a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :])
    if not gpus:
        return NvLinkSummary("none", 0)
    largest = max((len(clique) for clique in nx.find_cliques(graph)), default=1)
    if switch_members:
        kind = "nvswitch"
    elif graph.number_of_edges() == 0:
        kind = "none"
    else:
        kind = "pairs" if largest == 2 else "mesh"
    return NvLinkSummary(kind, largest)
