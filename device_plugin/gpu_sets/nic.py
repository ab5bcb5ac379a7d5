"""Criterion 4 of the objective: GPUDirect-close NICs (see device_plugin.gpu_sets.objective).

A GPU is NIC-close when some RDMA NIC is PIX or PXB from it
(device_plugin.topology.GPUDIRECT_CLOSE). GPUs that are close to the same NICs form a rail group: on
a PCIe tree the close NICs of a GPU are exactly the NICs below its topmost switch, so groups are
disjoint and share no NIC.

For a set S of k GPUs the criterion is packed into one integer, larger better:
- k >= 2: close(S) << RAIL_BITS | rails(S), where close(S) counts the NIC-close GPUs of S and
  rails(S) = sum over rail groups g of min(|S ∩ g|, NICs of g): how many GPUs of S can each drive a
  NIC of their own (on a PCIe tree, the largest GPU-NIC matching; "rail-aligned" NCCL traffic);
- k = 1: 1 when the GPU has no close NIC, else 0, so single-GPU pods leave NIC-close GPUs to the
  multi-GPU pods, the ones that go multi-node.
A node without NICs scores every set of a size the same, so its allocations do not change. Pure
functions over bitmasks; the exact tables precompute the value of every subset at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from device_plugin.topology.model import Topology

RAIL_BITS = 13  # rails(S) <= |S| < 2^13 for any node this plugin handles (4096 GPUs)


@dataclass(frozen=True)
class NicGroups:
    """Rail groups of one node: (GPU bitmask, number of NICs) each; `close_mask`: all NIC-close
    GPUs."""

    groups: tuple[tuple[int, int], ...]
    close_mask: int

    @classmethod
    def of(cls, topology: Topology) -> NicGroups:
        by_nics: dict[tuple[int, ...], int] = {}
        for gpu in range(topology.gpu_count):
            nics = topology.close_nics(gpu)
            if nics:
                by_nics[nics] = by_nics.get(nics, 0) | (1 << gpu)
        groups = tuple(sorted((mask, len(nics)) for nics, mask in by_nics.items()))
        close = 0
        for mask, _ in groups:
            close |= mask
        return cls(groups, close)

    @property
    def any(self) -> bool:
        return bool(self.groups)

    def close_count(self, mask: int) -> int:
        return (mask & self.close_mask).bit_count()

    def rails(self, mask: int) -> int:
        return sum(min((mask & gpus).bit_count(), nics) for gpus, nics in self.groups)

    def rank(self, mask: int) -> int:
        """Criterion 4 of the set `mask`, packed (module doc); 0 for every set on a node without
        NICs."""
        if not self.groups:
            return 0
        if mask & (mask - 1) == 0:
            return 0 if mask & self.close_mask else 1
        return (self.close_count(mask) << RAIL_BITS) | self.rails(mask)

    def ranks(self, n: int) -> list[int]:
        """rank() of every mask of n GPUs (index = mask); all zero without NICs."""
        size = 1 << n
        if not self.groups:
            return [0] * size
        return [self.rank(mask) for mask in range(size)]
