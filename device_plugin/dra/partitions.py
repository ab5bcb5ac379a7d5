"""Split a node's GPUs into best K-sets (`<ownDomain>/bestSetK` attributes) and derive the device
listing order.

Boundary: pure, over an Allocator; no NVML, no Kubernetes objects. For each size K in
PARTITION_SIZES
that the node has at least K GPUs for, the groups are chosen greedily by the allocator's own
objective: the best K-set of all eligible GPUs is group 0, the best K-set of the GPUs left is group
1, and so on. GPUs left over (fewer than K remain) get no `bestSetK` value, so a claim that matches
on it can never take them together.

The listing order matters because Kubernetes' structured allocator takes the first devices, in slice
order, that satisfy a request. Ordering by (group of the largest size, ..., pair, index)
puts the members of a best 8-set together, within them the best 4-sets, within those the best pairs.
Greedy groups of different sizes need not nest (a best 4-set may straddle two 8-sets on some 16-GPU
layouts); then the larger size wins the order and the smaller groups are split, which is documented
rather than hidden.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from device_plugin.gpu_sets import Allocator

PARTITION_SIZES = (2, 4, 8, 16)


@dataclass(frozen=True)
class Partitions:
    """groups[K] = the K-sets in greedy order (ascending GPU indices each); K only where enough
    GPUs."""

    groups: dict[int, tuple[tuple[int, ...], ...]]
    # size -> tier-pure groupings A, B, ... (ranked_sets.py); filled by the inventory once the order
    # is known
    ranked: dict[int, tuple[tuple[tuple[int, ...], ...], ...]] = field(default_factory=dict)

    def group_of(self, size: int, gpu: int) -> int | None:
        """The `partition<size>` value of `gpu`, or None when it is in no group of that size."""
        for number, members in enumerate(self.groups.get(size, ())):
            if gpu in members:
                return number
        return None

    def order(self, gpus: Iterable[int]) -> list[int]:
        """`gpus` in listing order: by group of the largest size first, down to pairs, then
        index."""
        sizes = sorted(self.groups, reverse=True)
        leftover = 1 << 30  # GPUs without a group of some size come after every group of it

        def key(gpu: int) -> tuple[int, ...]:
            ranks = [self.group_of(size, gpu) for size in sizes]
            return (*(leftover if rank is None else rank for rank in ranks), gpu)

        return sorted(gpus, key=key)


def compute_partitions(allocator: Allocator, eligible: Iterable[int]) -> Partitions:
    """Greedy best K-sets of `eligible` GPUs (whole GPUs; MIG-enabled ones are left out by the
    caller)."""
    pool = sorted(set(eligible))
    groups: dict[int, tuple[tuple[int, ...], ...]] = {}
    for size in PARTITION_SIZES:
        if size > len(pool):
            break
        remaining = list(pool)
        chosen: list[tuple[int, ...]] = []
        while len(remaining) >= size:
            best = allocator.allocate(remaining, [], size)
            chosen.append(tuple(best))
            remaining = [g for g in remaining if g not in best]
        groups[size] = tuple(chosen)
    return Partitions(groups)
