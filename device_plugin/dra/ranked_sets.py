"""Groupings of a node's good K-sets, published as `<ownDomain>/rankedSet<K><A..F>`.

Boundary: pure, over an Allocator; no NVML, no Kubernetes objects (inventory.py names and numbers
them). Nodes of up to COVERING_MAX_GPUS GPUs get covering groupings (covering_sets.py: a decision on
any letter is optimal among the free GPUs); larger ones, up to MAX_ENUMERATED_GPUS, the tier-pure
groupings below.

Why: one disjoint grouping (`bestSetK`, partitions.py) leaves equally good sets uncovered (on a
DGX-1 the double-NVLink pairs 0-4 and 1-5 are in no pair group), so a claim that matches on it is
refused, or falls back to any GPUs, while a best set is free. Kubernetes' allocator has no notion of
"better": it tries a claim's `firstAvailable` alternatives in order and, inside one, takes the first
group in listing order whose members are all free. So each grouping here holds only sets of one
score (criteria 1-4 of the allocator's objective), and grouping A's score is at least B's, B's at
least C's, and so on: a claim that tries A, B, C, D in that order gets a set of the best tier that
has a whole group free, and any group of a grouping is as good as any other of it, whatever the
listing order.

How (tier-pure, larger nodes): every K-set of the eligible GPUs is scored and the sets are taken
tier by tier, best first; each
tier is covered by disjoint groups, greedily in listing order, one grouping at a time, until
GROUPINGS[K] groupings are filled. Enumerating every K-set is cheap up to MAX_ENUMERATED_GPUS
(1,820 4-sets of 16 GPUs); larger nodes get no ranked groupings (bestSetK still).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from device_plugin.dra.covering_sets import COVERING_MAX_GPUS, covering_groupings, score_order
from device_plugin.gpu_sets import Allocator

# Groupings per size. 4-sets: A..F, with a NUMA-node and an any-K fallback all 8 of firstAvailable's
# alternatives (four left a DGX-1 claim to "any 4" on a worse set). Pairs: A..D already decide every
# pair claim of the benchmark's traces optimally, and the API allows 32 attributes a device (a
# DGX-1's are 31).
GROUPINGS = {2: 4, 4: 6}
RANKED_SIZES = tuple(GROUPINGS)
MAX_ENUMERATED_GPUS = 16
LETTERS = "ABCDEFGH"

Group = tuple[int, ...]
Grouping = tuple[Group, ...]


__all__ = [
    "GROUPINGS",
    "LETTERS",
    "RANKED_SIZES",
    "ranked_groupings",
    "ranked_values",
    "score_order",
]


def ranked_groupings(
    allocator: Allocator, listing: Sequence[int], size: int, budget: int | None = None
) -> tuple[Grouping, ...]:
    """Up to `budget` groupings of `size`-sets of the GPUs in `listing` (in listing order); each
    grouping's groups disjoint and ordered by their first member's listing place. Covering groupings
    on small nodes, else groupings of one score each, best first."""
    budget = GROUPINGS.get(size, 0) if budget is None else budget
    if size > len(listing) or len(listing) > MAX_ENUMERATED_GPUS or budget < 1:
        return ()
    if len(listing) <= COVERING_MAX_GPUS:
        return covering_groupings(allocator, listing, size, budget)
    return tier_groupings(allocator, listing, size, budget)


def tier_groupings(
    allocator: Allocator, listing: Sequence[int], size: int, budget: int
) -> tuple[Grouping, ...]:
    """Groupings of one score each, best first (docstring above)."""
    place = {gpu: i for i, gpu in enumerate(listing)}
    by_place = sorted(listing, key=place.__getitem__)
    tiers: dict[tuple[float, float, int, int], list[Group]] = {}
    for members in combinations(by_place, size):  # lexicographic in listing order
        tiers.setdefault(score_order(allocator.score(members)), []).append(members)
    groupings: list[Grouping] = []
    for tier in sorted(tiers, reverse=True):
        left = tiers[tier]
        while left and len(groupings) < budget:
            taken: set[int] = set()
            grouping = []
            for members in left:
                if taken.isdisjoint(members):
                    grouping.append(members)
                    taken.update(members)
            groupings.append(tuple(tuple(sorted(g)) for g in grouping))
            chosen = set(grouping)
            left = [members for members in left if members not in chosen]
        if len(groupings) == budget:
            break
    return tuple(groupings)


def ranked_values(groupings: Sequence[Grouping], gpu: int) -> list[tuple[int, int]]:
    """(grouping number, group number) of each grouping that has `gpu` in a group."""
    return [
        (number, index)
        for number, grouping in enumerate(groupings)
        for index, members in enumerate(grouping)
        if gpu in members
    ]
