"""Groupings of K-sets chosen so that Kubernetes' first fit over them lands on a set optimal among
the free GPUs.

Boundary: pure, over an Allocator; no NVML, no Kubernetes objects. ranked_sets.py decides when this
is used (nodes of up to COVERING_MAX_GPUS GPUs) and inventory.py publishes the result as
`rankedSet<K><A..F>`.

Why: Kubernetes' allocator has no notion of "better". A claim tries its `firstAvailable`
alternatives in order; inside one (a `matchAttribute` on a grouping) it takes the first group, in
listing order, whose members are all free. Groupings of one score each (the tier rule for larger
nodes) leave it with no free group once every top set is broken up: then it falls to "one NUMA node"
or "any K", and on a DGX-1 with GPUs [1,2,3,4,7] free it took the first four, [1,2,3,4], where
[1,2,3,7] was better.

How: a "situation" is a set of free GPUs of at least K. For each, the best K-set among them is the
allocator's (criteria 1-4, score_order). A grouping is any family of disjoint K-sets; in a situation
it *decides* when one of its groups is wholly free, and its decision is the first such group in
listing order. Groupings are chosen greedily, one per letter, among those that decide every
situation not yet decided by an earlier letter optimally: first the one that decides the most
situations where the claim's later alternatives (one NUMA node, then any K) would take a worse set,
then the one that decides the most in all. So a decision taken on any letter is always optimal among
the free GPUs, and only situations that no letter decides reach the later alternatives. Situations
are bit masks over listing positions and each candidate's decisions are big-int bit sets over
situations, so a choice costs a few integer operations per candidate (8 GPUs: 763 candidate pair
groupings, 247 situations).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from device_plugin.gpu_sets import Allocator
from device_plugin.gpu_sets.objective import SetScore

COVERING_MAX_GPUS = 8  # 2^8 situations; at 16 GPUs the candidate families alone run to millions

Group = tuple[int, ...]
Grouping = tuple[Group, ...]


def score_order(score: SetScore) -> tuple[float, float, int, int]:
    """Criteria 1-4 in the allocator's order (objective.pack_key): ring, total bandwidth, fewer NUMA
    nodes, NIC rank; larger is better."""
    return (score.ring_gbps, score.total_gbps, -score.numa_nodes, score.nic_rank)


def covering_groupings(
    allocator: Allocator, listing: Sequence[int], size: int, budget: int
) -> tuple[Grouping, ...]:
    """Up to `budget` groupings of `size`-sets of the GPUs in `listing` (listing order), chosen as
    above; each grouping's groups disjoint and in listing order of their first member."""
    n = len(listing)
    if not 0 < size <= n <= COVERING_MAX_GPUS or budget < 1:
        return ()
    gpus = list(listing)
    situations = [free for free in range(1 << n) if free.bit_count() >= size]
    best = [
        score_order(allocator.score(allocator.allocate(_members(gpus, free), [], size)))
        for free in situations
    ]
    fits: dict[int, int] = {}  # a K-set's mask -> bit set of the situations it is wholly free in
    good: dict[int, int] = {}  # ... and of those where it is an optimal choice
    for members in combinations(range(n), size):
        mask = sum(1 << p for p in members)
        score = score_order(allocator.score(tuple(gpus[p] for p in members)))
        fits[mask] = good[mask] = 0
        for number, free in enumerate(situations):
            if mask & ~free == 0:
                fits[mask] |= 1 << number
                if score == best[number]:
                    good[mask] |= 1 << number
    numa = allocator.topology.numa_nodes
    # Where the claim's later alternatives (one NUMA node, then any K) would go wrong: letters are
    # spent there first.
    needed = sum(
        1 << number
        for number, free in enumerate(situations)
        if score_order(allocator.score(_fallback(gpus, free, size, numa))) != best[number]
    )
    candidates = [_decisions(family, fits, good) for family in _families(sorted(fits), 0)]
    undecided = (1 << len(situations)) - 1
    chosen: list[tuple[int, ...]] = []
    while len(chosen) < budget:
        pick = _best_candidate(candidates, undecided, needed)
        if pick is None:
            break
        family, decides, _ = pick
        chosen.append(family)
        undecided &= ~decides
    return tuple(tuple(_members(gpus, mask) for mask in family) for family in chosen)


def _members(gpus: Sequence[int], mask: int) -> tuple[int, ...]:
    return tuple(sorted(gpus[p] for p in range(len(gpus)) if mask >> p & 1))


def _families(masks: Sequence[int], used: int) -> list[tuple[int, ...]]:
    """Every non-empty family of disjoint masks from `masks` avoiding `used`, each in listing order
    of its lowest member (for disjoint sets that is the order the allocator's first fit tries them
    in)."""
    out: list[tuple[int, ...]] = []
    for i, mask in enumerate(masks):
        if mask & used:
            continue
        out.append((mask,))
        out.extend(
            tuple(sorted((mask, *rest), key=_lowest))
            for rest in _families(masks[i + 1 :], used | mask)
        )
    return sorted(out, key=lambda family: [_lowest(m) for m in family])


def _lowest(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


def _decisions(
    family: tuple[int, ...], fits: dict[int, int], good: dict[int, int]
) -> tuple[tuple[int, ...], int, int]:
    """(family, situations it decides, situations it decides optimally): its first wholly free group
    decides."""
    decided = right = 0
    for mask in family:  # in listing order of their lowest member (_families)
        right |= good[mask] & ~decided
        decided |= fits[mask]
    return family, decided, right


def _fallback(
    gpus: Sequence[int], free: int, size: int, numa: Sequence[int | None]
) -> tuple[int, ...]:
    """What the claim's last alternatives take in situation `free`: the first `size` free GPUs
    (listing order) of the first NUMA node, in listing order, that has that many free; else the
    first `size` free GPUs."""
    listed = [gpus[p] for p in range(len(gpus)) if free >> p & 1]
    for node in dict.fromkeys(numa[g] for g in listed):
        same = [g for g in listed if numa[g] == node]
        if node is not None and len(same) >= size:
            return tuple(same[:size])
    return tuple(listed[:size])


def _best_candidate(
    candidates: Sequence[tuple[tuple[int, ...], int, int]], undecided: int, needed: int
) -> tuple[tuple[int, ...], int, int] | None:
    """Among the candidates that decide every undecided situation they decide optimally, the one
    that decides the most where the later alternatives would go wrong (`needed`), then the most in
    all; the first such on a tie."""
    pick, most = None, (0, 0)
    for candidate in candidates:
        _, decides, right = candidate
        new = decides & undecided
        if new & ~right:
            continue  # would decide some situation on a worse set than the best free one
        if (count := ((new & needed).bit_count(), new.bit_count())) > most:
            pick, most = candidate, count
    return pick
