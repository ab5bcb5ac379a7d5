"""Tier-pure groupings of a node's good K-sets, published as `<ownDomain>/rankedSet<K><A..D>`.

Boundary: pure, over an Allocator; no NVML, no Kubernetes objects (inventory.py names and numbers them).

Why: one disjoint grouping (`bestSetK`, partitions.py) leaves equally good sets uncovered (on a DGX-1 the
double-NVLink pairs 0-4 and 1-5 are in no pair group), so a claim that matches on it is refused, or falls
back to any GPUs, while a best set is free. Kubernetes' allocator has no notion of "better": it tries a
claim's `firstAvailable` alternatives in order and, inside one, takes the first group in listing order
whose members are all free. So each grouping here holds only sets of one score (criteria 1-4 of the
allocator's objective), and grouping A's score is at least B's, B's at least C's, and so on: a claim
that tries A, B, C, D in that order gets a set of the best tier that has a whole group free, and any
group of a grouping is as good as any other of it, whatever the listing order.

How: every K-set of the eligible GPUs is scored and the sets are taken tier by tier, best first; each
tier is covered by disjoint groups, greedily in listing order, one grouping at a time, until
GROUPINGS_PER_SIZE groupings are filled. Enumerating every K-set is cheap up to MAX_ENUMERATED_GPUS
(1,820 4-sets of 16 GPUs); larger nodes get no ranked groupings (bestSetK still).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from device_plugin.allocator import Allocator
from device_plugin.allocator.objective import SetScore

RANKED_SIZES = (2, 4)
GROUPINGS_PER_SIZE = 4  # A..D: with a NUMA-node and an any-K fallback, 6 of firstAvailable's 8 alternatives
MAX_ENUMERATED_GPUS = 16
LETTERS = "ABCDEFGH"

Group = tuple[int, ...]
Grouping = tuple[Group, ...]


def score_order(score: SetScore) -> tuple[float, float, int, int]:
    """Criteria 1-4 in the allocator's order (objective.pack_key): ring, total bandwidth, fewer NUMA nodes,
    NIC rank; larger is better."""
    return (score.ring_gbps, score.total_gbps, -score.numa_nodes, score.nic_rank)


def ranked_groupings(
    allocator: Allocator, listing: Sequence[int], size: int, budget: int = GROUPINGS_PER_SIZE
) -> tuple[Grouping, ...]:
    """Up to `budget` groupings of `size`-sets of the GPUs in `listing` (in listing order), each of one
    score, best first; each grouping's groups disjoint and ordered by their first member's listing place."""
    if size > len(listing) or len(listing) > MAX_ENUMERATED_GPUS or budget < 1:
        return ()
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
