"""The topology model: a frozen value holding, for every GPU pair, how it is connected and how fast.

`Topology` is the one source of derived topology facts: the allocator, node labels and the DRA
inventory read NVLink domains, PCIe paths and roots, GPU-NIC levels and bandwidth tiers from it,
never from the backend again and never by a graph walk of their own. It is a pure value (no backend,
no graph object), so the allocator stays a pure function; the derived facts are computed once, when
it is built. `device_plugin.topology.build.build_topology` makes one from any NvmlBackend, real or
fake. Bandwidth figures come from `device_plugin.topology.facts`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from device_plugin.core.errors import MachineDescriptionError
from device_plugin.nvml.fabric_types import FabricInfo
from device_plugin.nvml.pcie_paths import pcie_roots
from device_plugin.nvml.types import PcieLevel
from device_plugin.topology.components import connected_components, largest_clique_size

# GPUDirect RDMA is fast when GPU and NIC meet below the host bridge (PIX or PXB in nvidia-smi topo
# -m).
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
        """`nvidia-smi topo -m` style: NV<n> direct, NVS<n> through NVSwitch, else the PCIe
        level."""
        if self.nvlinks:
            return f"{'NVS' if self.via_nvswitch else 'NV'}{self.nvlinks}"
        return self.pcie_level.short_name


@dataclass(frozen=True)
class BandwidthTier:
    """The GPUs joined by pairs at `min_mbps` or faster: connected groups, each ascending."""

    min_mbps: int
    groups: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Topology:
    """Pair facts for the GPUs of one node, indexed by NVML index.

    links[a][b] is the PairLink of GPUs a and b (symmetric), None on the diagonal.
    numa_nodes[i] is GPU i's NUMA node, None when the platform does not report one.
    nic_names[k] is NIC k's RDMA device name (NICs in NicSource order); nic_levels[i][k] is the
    closest common PCIe ancestor of GPU i and NIC k. A node without RDMA NICs has both empty.
    gpu_pcie_paths[i] is GPU i's root-first PCIe path as the hardware layer hands it up (sysfs on a
    real node, the description on a simulated one; device_plugin.nvml.pcie_paths), None where
    unknown; empty when no path is known at all. nvswitch_seen: some GPU has an active NVLink into
    an NVSwitch. gpu_fabric[i] is GPU i's NVLink fabric registration beyond the node
    (device_plugin.nvml.fabric_types; the node's clique: device_plugin.topology.fabric); empty when
    not read.
    """

    gpu_names: tuple[str, ...]
    numa_nodes: tuple[int | None, ...]
    links: tuple[tuple[PairLink | None, ...], ...]
    nic_names: tuple[str, ...] = ()
    nic_levels: tuple[tuple[PcieLevel, ...], ...] = ()
    gpu_pcie_paths: tuple[tuple[str, ...] | None, ...] = ()
    nvswitch_seen: bool = False
    gpu_fabric: tuple[FabricInfo, ...] = ()
    # Derived once in __post_init__ from the fields above; not compared (they follow from them).
    _domains: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)
    _roots: tuple[str | None, ...] = field(init=False, repr=False, compare=False)
    _tiers: tuple[BandwidthTier, ...] = field(init=False, repr=False, compare=False)
    _largest_group: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._validate()
        n = self.gpu_count
        nvlinked = self._nvlinked
        components = connected_components(n, nvlinked)
        domain_of = {gpu: component for component in components for gpu in component}
        paths = self.gpu_pcie_paths or (None,) * n
        bw = self.bandwidth_mbps_matrix()
        speeds = sorted({bw[a][b] for a in range(n) for b in range(a + 1, n)}, reverse=True)

        def at_least(speed: int) -> Callable[[int, int], bool]:
            return lambda a, b: bw[a][b] >= speed

        tiers = tuple(
            BandwidthTier(speed, connected_components(n, at_least(speed))) for speed in speeds
        )
        object.__setattr__(self, "_domains", tuple(domain_of[gpu] for gpu in range(n)))
        object.__setattr__(self, "_roots", pcie_roots(paths))
        object.__setattr__(self, "_tiers", tiers)
        object.__setattr__(self, "_largest_group", largest_clique_size(n, nvlinked))

    def _nvlinked(self, a: int, b: int) -> bool:
        link = self.links[a][b]
        return link is not None and link.nvlinks > 0

    def _validate(self) -> None:
        n = len(self.gpu_names)
        if (
            len(self.numa_nodes) != n
            or len(self.links) != n
            or any(len(row) != n for row in self.links)
        ):
            raise MachineDescriptionError(
                "topology", f"needs {n} NUMA entries and an {n}x{n} link matrix"
            )
        for a in range(n):
            if self.links[a][a] is not None:
                raise MachineDescriptionError(
                    f"topology.links[{a}][{a}]", "a GPU has no link to itself"
                )
            for b in range(a + 1, n):
                ab, ba = self.links[a][b], self.links[b][a]
                if ab is None or ab != ba:
                    raise MachineDescriptionError(
                        f"topology.links[{a}][{b}]", "pair facts must exist and be symmetric"
                    )
                if not ab.bandwidth_gbps > 0:
                    raise MachineDescriptionError(
                        f"topology.links[{a}][{b}]", "bandwidth must be positive"
                    )
        shape_ok = len(self.nic_levels) == n and all(
            len(r) == len(self.nic_names) for r in self.nic_levels
        )
        if self.nic_names and not shape_ok:
            raise MachineDescriptionError(
                "topology.nic_levels", f"needs a {n}x{len(self.nic_names)} GPU-NIC matrix"
            )
        if not self.nic_names and self.nic_levels:
            raise MachineDescriptionError("topology.nic_levels", "GPU-NIC levels without NICs")
        if self.gpu_pcie_paths and len(self.gpu_pcie_paths) != n:
            raise MachineDescriptionError(
                "topology.gpu_pcie_paths", f"needs {n} entries (None where unknown)"
            )
        if self.gpu_fabric and len(self.gpu_fabric) != n:
            raise MachineDescriptionError("topology.gpu_fabric", f"needs {n} entries, one per GPU")

    def nvlink_domain(self, gpu: int) -> tuple[int, ...]:
        """The GPUs reachable from `gpu` over NVLink or NVSwitch, itself included, ascending."""
        return self._domains[gpu]

    def nvlink_domains(self) -> tuple[tuple[int, ...], ...]:
        """Every NVLink connected component once, by lowest member; an unlinked GPU is its own."""
        return tuple(domain for gpu, domain in enumerate(self._domains) if domain[0] == gpu)

    @property
    def largest_nvlink_group(self) -> int:
        """Size of the largest set of GPUs all pairwise NVLinked (directly or by NVSwitch); 1 when
        none are."""
        return self._largest_group

    @property
    def nvlinked(self) -> bool:
        """Some GPU pair has an NVLink (direct or through an NVSwitch)."""
        return any(len(domain) > 1 for domain in self._domains)

    def pcie_path(self, gpu: int) -> tuple[str, ...] | None:
        """GPU's root-first PCIe path from the hardware layer; None when it is unknown."""
        return self.gpu_pcie_paths[gpu] if self.gpu_pcie_paths else None

    def gpu_clique(self, gpu: int) -> str | None:
        """`<clusterUUID>.<cliqueID>` of the NVLink clique GPU is registered in; None when it is in
        none (yet)."""
        if not self.gpu_fabric or not self.gpu_fabric[gpu].attached:
            return None
        return self.gpu_fabric[gpu].clique

    def pcie_root(self, gpu: int) -> str | None:
        """GPU's PCIe root complex as `pci<domain>:<bus>` (Kubernetes' pcieRoot); None when
        unknown."""
        return self._roots[gpu]

    @property
    def bandwidth_tiers(self) -> tuple[BandwidthTier, ...]:
        """For each distinct pair bandwidth (integer MB/s), fastest first, the groups joined at >=
        it."""
        return self._tiers

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_names)

    @property
    def nic_count(self) -> int:
        return len(self.nic_names)

    def nic_level(self, gpu: int, nic: int) -> PcieLevel:
        return self.nic_levels[gpu][nic]

    def close_nics(self, gpu: int) -> tuple[int, ...]:
        """NICs GPUDirect RDMA runs fast with from this GPU: PIX or PXB, no host bridge in
        between."""
        return tuple(k for k in range(self.nic_count) if self.nic_levels[gpu][k] <= GPUDIRECT_CLOSE)

    def close_nic_names(self) -> dict[int, tuple[str, ...]]:
        """GPU index -> names of its GPUDirect-close NICs, for the GPUs that have any."""
        names = {
            gpu: tuple(self.nic_names[k] for k in self.close_nics(gpu))
            for gpu in range(self.gpu_count)
        }
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
        """Integer MB/s per pair (0 on the diagonal): the allocator adds and compares these
        exactly."""
        return tuple(
            tuple(0 if link is None else round(link.bandwidth_gbps * 1000) for link in row)
            for row in self.links
        )
