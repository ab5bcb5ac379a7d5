"""The topology model: a frozen value holding, for every GPU pair, how it is connected and how fast.

`Topology` is what the allocator consumes; it is a pure value (no backend, no graph object), so the
allocator stays a pure function. `device_plugin.topology_build.build_topology` makes one from any
NvmlBackend, real or fake. Bandwidth figures come from `device_plugin.topology_facts`.
"""

from __future__ import annotations

from dataclasses import dataclass

from device_plugin.errors import MachineDescriptionError
from device_plugin.nvml.types import PcieLevel


@dataclass(frozen=True)
class PairLink:
    """How two distinct GPUs reach each other.

    `nvlinks` counts the NVLinks the pair can use: direct links, or, for GPUs on a common NVSwitch
    fabric, the smaller of the two GPUs' link counts into the switches both reach (`via_nvswitch`).
    `bandwidth_gbps` is one direction, from the facts table.
    """

    nvlinks: int
    via_nvswitch: bool
    pcie_level: PcieLevel
    same_numa: bool
    bandwidth_gbps: float

    @property
    def label(self) -> str:
        """`nvidia-smi topo -m` style: NV<n> direct, NVS<n> through NVSwitch, else the PCIe level."""
        if self.nvlinks:
            return f"{'NVS' if self.via_nvswitch else 'NV'}{self.nvlinks}"
        return self.pcie_level.short_name


@dataclass(frozen=True)
class Topology:
    """Pair facts for the GPUs of one node, indexed by NVML index.

    links[a][b] is the PairLink of GPUs a and b (symmetric), None on the diagonal.
    numa_nodes[i] is GPU i's NUMA node, None when the platform does not report one.
    """

    gpu_names: tuple[str, ...]
    numa_nodes: tuple[int | None, ...]
    links: tuple[tuple[PairLink | None, ...], ...]

    def __post_init__(self) -> None:
        n = len(self.gpu_names)
        if len(self.numa_nodes) != n or len(self.links) != n or any(len(row) != n for row in self.links):
            raise MachineDescriptionError("topology", f"needs {n} NUMA entries and an {n}x{n} link matrix")
        for a in range(n):
            if self.links[a][a] is not None:
                raise MachineDescriptionError(f"topology.links[{a}][{a}]", "a GPU has no link to itself")
            for b in range(a + 1, n):
                ab, ba = self.links[a][b], self.links[b][a]
                if ab is None or ab != ba:
                    raise MachineDescriptionError(f"topology.links[{a}][{b}]", "pair facts must exist and be symmetric")
                if not ab.bandwidth_gbps > 0:
                    raise MachineDescriptionError(f"topology.links[{a}][{b}]", "bandwidth must be positive")

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_names)

    def pair(self, a: int, b: int) -> PairLink:
        link = self.links[a][b]
        if link is None:
            raise ValueError(f"GPU {a} has no pair link to itself")
        return link

    def bandwidth_gbps(self, a: int, b: int) -> float:
        return self.pair(a, b).bandwidth_gbps

    def bandwidth_mbps_matrix(self) -> tuple[tuple[int, ...], ...]:
        """Integer MB/s per pair (0 on the diagonal): the allocator adds and compares these exactly."""
        return tuple(
            tuple(0 if link is None else round(link.bandwidth_gbps * 1000) for link in row) for row in self.links
        )
