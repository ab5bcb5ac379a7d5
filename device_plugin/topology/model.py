"""The topology model: a frozen value holding, for every GPU pair, how it is connected and how fast.

`Topology` is what the allocator consumes; it is a pure value (no backend, no graph object), so the
allocator stays a pure function. `device_plugin.topology.build.build_topology` makes one from any
NvmlBackend, real or fake. Bandwidth figures come from `device_plugin.topology.facts`.
"""

from __future__ import annotations

from dataclasses import dataclass

from device_plugin.core.errors import MachineDescriptionError
from device_plugin.nvml.types import PcieLevel

# GPUDirect RDMA is fast when GPU and NIC meet below the host bridge (PIX or PXB in nvidia-smi topo -m).
GPUDIRECT_CLOSE = PcieLevel.MULTIPLE_SWITCHES


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
    nic_names[k] is NIC k's RDMA device name (NICs in NicSource order); nic_levels[i][k] is the closest
    common PCIe ancestor of GPU i and NIC k. A node without RDMA NICs has both empty.
    """

    gpu_names: tuple[str, ...]
    numa_nodes: tuple[int | None, ...]
    links: tuple[tuple[PairLink | None, ...], ...]
    nic_names: tuple[str, ...] = ()
    nic_levels: tuple[tuple[PcieLevel, ...], ...] = ()

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
        shape_ok = len(self.nic_levels) == n and all(len(r) == len(self.nic_names) for r in self.nic_levels)
        if self.nic_names and not shape_ok:
            raise MachineDescriptionError("topology.nic_levels", f"needs a {n}x{len(self.nic_names)} GPU-NIC matrix")
        if not self.nic_names and self.nic_levels:
            raise MachineDescriptionError("topology.nic_levels", "GPU-NIC levels without NICs")

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_names)

    @property
    def nic_count(self) -> int:
        return len(self.nic_names)

    def nic_level(self, gpu: int, nic: int) -> PcieLevel:
        return self.nic_levels[gpu][nic]

    def close_nics(self, gpu: int) -> tuple[int, ...]:
        """NICs GPUDirect RDMA runs fast with from this GPU: PIX or PXB, no host bridge in between."""
        return tuple(k for k in range(self.nic_count) if self.nic_levels[gpu][k] <= GPUDIRECT_CLOSE)

    def close_nic_names(self) -> dict[int, tuple[str, ...]]:
        """GPU index -> names of its GPUDirect-close NICs, for the GPUs that have any."""
        names = {gpu: tuple(self.nic_names[k] for k in self.close_nics(gpu)) for gpu in range(self.gpu_count)}
        return {gpu: nics for gpu, nics in names.items() if nics}

    def nearest_nic(self, gpu: int) -> int | None:
        """The closest NIC (lowest index among equals); None on a node without NICs."""
        if not self.nic_count:
            return None
        return min(range(self.nic_count), key=lambda k: (self.nic_levels[gpu][k], k))

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
