"""The bounded search for machines above 16 GPUs, where scoring all 2^n subsets at start is too
slow.

Objective, approximated: criterion 1 (the best ring) is replaced by its lower bound, the slowest
pair in the set; it equals the ring whenever the set is a clique at that speed, which is what the
greedy builds on NVSwitch fabrics and PCIe trees. Criteria 2, 3 and 6 are exact; criterion 4 (NICs)
is not used here (no machine above 16 GPUs ships with NICs). Criterion 5 (the Qj
terms need all subsets) is replaced by a grouping score of what is left free, R: for each distinct
pair bandwidth t, fastest first, the GPUs fall into groups (connected components of the pairs at
>= t: NVLink islands, PCIe switches, sockets); the score is the sum over groups of (free GPUs in the
group)^2, which is larger when free GPUs stay together in few groups, compared t by t, then P(R).

Search: greedy construction from up to SEED_CAP seeds. A seed is one available GPU (the lowest
SEED_CAP by index that are not must-include; every one for a 1-GPU request) added to the
must-include set; the set then grows one GPU at a time, each time adding the GPU that maximises
(slowest pair, total bandwidth, -NUMA nodes, -index). The best grown set by (approximate key,
grouping score, P(R), criterion 6) wins. Cost:
O(SEED_CAP x size x |available|) pair look-ups plus O(SEED_CAP x |available|^2) for P, bounded for
any request; the answer is always a valid set (right size, inside available, containing must).
"""

from __future__ import annotations

from device_plugin.gpu_sets.objective import pack_key

SEED_CAP = 32
_INFINITE = 1 << 60


def _numa_count(members: list[int], numa: tuple[int, ...]) -> int:
    return len({numa[m] for m in members})


def _set_key(bw: tuple[tuple[int, ...], ...], numa: tuple[int, ...], members: list[int]) -> int:
    slowest = _INFINITE
    total = 0
    for i, a in enumerate(members):
        row = bw[a]
        for b in members[i + 1 :]:
            w = row[b]
            total += w
            if w < slowest:
                slowest = w
    ring = 0 if len(members) < 2 else slowest
    return pack_key(ring, total, _numa_count(members, numa))


def _partner_sum(bw: tuple[tuple[int, ...], ...], remaining: list[int]) -> int:
    if len(remaining) < 2:
        return 0
    return sum(max(bw[v][u] for u in remaining if u != v) for v in remaining)


def _grow(
    bw: tuple[tuple[int, ...], ...],
    numa: tuple[int, ...],
    start: list[int],
    pool: list[int],
    size: int,
) -> list[int]:
    chosen = list(start)
    chosen_numa = {numa[m] for m in chosen}
    slowest_so_far = _INFINITE
    for i, a in enumerate(chosen):
        for b in chosen[i + 1 :]:
            slowest_so_far = min(slowest_so_far, bw[a][b])
    slowest_to = {u: min((bw[u][m] for m in chosen), default=_INFINITE) for u in pool}
    sum_to = {u: sum(bw[u][m] for m in chosen) for u in pool}
    taken = set(chosen)
    candidates = [u for u in pool if u not in taken]
    while len(chosen) < size:
        best = max(
            candidates,
            key=lambda u: (
                min(slowest_so_far, slowest_to[u]),
                sum_to[u],
                -len(chosen_numa | {numa[u]}),
                -u,
            ),
        )
        chosen.append(best)
        chosen_numa.add(numa[best])
        slowest_so_far = min(slowest_so_far, slowest_to[best])
        candidates.remove(best)
        for u in candidates:
            w = bw[u][best]
            sum_to[u] += w
            if w < slowest_to[u]:
                slowest_to[u] = w
    return sorted(chosen)


def _grouping(
    levels: tuple[tuple[frozenset[int], ...], ...], remaining: set[int]
) -> tuple[int, ...]:
    return tuple(sum(len(group & remaining) ** 2 for group in groups) for groups in levels)


def search_bounded(
    bw: tuple[tuple[int, ...], ...],
    numa: tuple[int, ...],
    levels: tuple[tuple[frozenset[int], ...], ...],
    available: list[int],
    must: list[int],
    size: int,
) -> tuple[int, ...]:
    """A good valid set for a validated request (available and must sorted ascending).

    `levels` is the Topology's bandwidth tiers as sets (its groups at each speed), computed once per
    machine.
    """
    must_set = set(must)
    free = [g for g in available if g not in must_set]
    if len(must) == size:
        return tuple(sorted(must))
    seeds = free[:SEED_CAP] if must or size > 1 else free
    best: tuple[int, tuple[int, ...], int, tuple[int, ...]] | None = None
    for seed in seeds:
        grown = _grow(bw, numa, [*must, seed], free, size)
        taken = set(grown)
        remaining = [g for g in available if g not in taken]
        rank = (
            _set_key(bw, numa, grown),
            _grouping(levels, set(remaining)),
            _partner_sum(bw, remaining),
            tuple(-g for g in grown),
        )
        if best is None or rank > best:
            best = rank
    assert best is not None  # validated: size > len(must) implies a free GPU exists
    return tuple(-g for g in best[3])
