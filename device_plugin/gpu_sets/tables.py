"""Start-up precompute for the exact search (at most MAX_EXACT_GPUS GPUs): every subset scored once.

Subsets are bitmasks (bit i = GPU i). For all 2^n masks we compute criteria 1-4 of the objective
(device_plugin.gpu_sets.objective) and the Qj tables of criterion 5, then sort the masks of every
size best first, so a request is a scan of one sorted list (device_plugin.gpu_sets.exact).

The expensive part is ring(S), the bottleneck Hamiltonian cycle. It is done by thresholding: for
each distinct pair bandwidth t (a handful on real machines) except the smallest, one dynamic
programme shared by all subsets decides which subsets have a Hamiltonian cycle using only pairs of
bandwidth >= t. reach[S] is the bitmask of GPUs v such that a path starting at S's lowest GPU visits
exactly S and ends at v; S has a cycle at t when reach[S] meets the neighbours of its lowest GPU.
Two shortcuts skip the inner loop for most subsets of real machines: a subset whose slowest pair is
>= t is a clique at t (every ordering is a path), and a subset spanning two connected components of
the threshold graph (the Topology's bandwidth tier at t) has no path at all. ring(S) is the largest
t with a cycle (the smallest distinct value always has one: the graph is complete). Cost: O(n 2^n)
per threshold in the worst case, on every 16-GPU machine we ship far less
(benchmarks/bench_allocator.py prints it).

Per-row minima, maxima and sums over a mask use two half-width lookup tables (low and high bits),
so each subset costs O(1) for criteria 2 and 3 and for the pair minimum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from device_plugin.gpu_sets.objective import FRAG_SIZES, pack_frag, pack_key
from device_plugin.gpu_sets.positions import PositionSets, build_positions
from device_plugin.topology.model import BandwidthTier

MAX_EXACT_GPUS = 16
_NO_PAIR = 1 << 40  # "no pair yet" for the running minimum of a single GPU


@dataclass(frozen=True)
class HalfTables:
    """Row aggregates over a mask, split into low and high bit halves: f(row, mask) = f(lo[mask &
    m], hi[mask >> h])."""

    shift: int
    low_mask: int
    low: tuple[tuple[int, ...], ...]
    high: tuple[tuple[int, ...], ...]


def _half_tables(bw: tuple[tuple[int, ...], ...], combine: str) -> HalfTables:
    n = len(bw)
    shift = (n + 1) // 2
    low_mask = (1 << shift) - 1
    identity = {"min": _NO_PAIR, "max": 0, "sum": 0}[combine]
    ops: dict[str, Callable[[int, int], int]] = {"min": min, "max": max, "sum": lambda x, y: x + y}
    op = ops[combine]

    def table(row: tuple[int, ...], offset: int, width: int) -> tuple[int, ...]:
        out = [identity] * (1 << width)
        for mask in range(1, 1 << width):
            bit = (mask & -mask).bit_length() - 1
            out[mask] = op(out[mask & (mask - 1)], row[offset + bit])
        return tuple(out)

    return HalfTables(
        shift=shift,
        low_mask=low_mask,
        low=tuple(table(row, 0, shift) for row in bw),
        high=tuple(table(row, shift, n - shift) for row in bw),
    )


@dataclass(frozen=True)
class ExactTables:
    """Everything a request needs; lists are indexed by mask, `order[k]` lists size-k masks best
    first."""

    n: int
    bw: tuple[tuple[int, ...], ...]
    key: list[int]
    ring: list[int]
    order: tuple[list[int], ...]
    # -key of order[k], ascending: bisect finds the end of a tie block
    neg_key: tuple[list[int], ...]
    positions: PositionSets  # which positions of order[k] hold which GPU (a request's candidates)
    best_ring: dict[int, list[int]]  # j -> Qj per mask, for j in FRAG_SIZES with j < n
    # criterion 5 of each mask as the free set that a choice leaves, packed (pack_frag)
    frag: list[int]


def build_tables(
    bw: tuple[tuple[int, ...], ...],
    numa: tuple[int | None, ...],
    nic_ranks: list[int] | None = None,
    *,
    tiers: tuple[BandwidthTier, ...],
) -> ExactTables:
    """The tables of a node; `nic_ranks[mask]` is criterion 4 of each subset (None: a node without
    NICs).

    `tiers` is the Topology's bandwidth_tiers, computed from the same `bw`."""
    n = len(bw)
    if not 1 <= n <= MAX_EXACT_GPUS:
        raise ValueError(f"exact tables need 1..{MAX_EXACT_GPUS} GPUs, got {n}")
    size = 1 << n
    mins, sums, maxes = _half_tables(bw, "min"), _half_tables(bw, "sum"), _half_tables(bw, "max")
    shift, low_mask = mins.shift, mins.low_mask
    numa_ids = sorted({-1 if node is None else node for node in numa})
    numa_bit = [1 << numa_ids.index(-1 if node is None else node) for node in numa]

    popcount = [0] * size
    min_pair = [_NO_PAIR] * size
    total = [0] * size
    numa_mask = [0] * size
    for mask in range(1, size):
        low = mask & -mask
        rest = mask ^ low
        v = low.bit_length() - 1
        popcount[mask] = popcount[rest] + 1
        numa_mask[mask] = numa_mask[rest] | numa_bit[v]
        if rest:
            lo, hi = rest & low_mask, rest >> shift
            row_min = mins.low[v][lo]
            high_min = mins.high[v][hi]
            if high_min < row_min:
                row_min = high_min
            min_pair[mask] = row_min if row_min < min_pair[rest] else min_pair[rest]
            total[mask] = total[rest] + sums.low[v][lo] + sums.high[v][hi]

    ring = _rings(bw, popcount, min_pair, tiers)
    if nic_ranks is None:
        key = [pack_key(ring[m], total[m], numa_mask[m].bit_count()) for m in range(size)]
    else:
        key = [
            pack_key(ring[m], total[m], numa_mask[m].bit_count(), nic_ranks[m]) for m in range(size)
        ]
    key[0] = -1
    order, neg_key = _orders(n, key, popcount)
    best_ring = {j: _best_ring_of_size(j, ring, popcount, maxes) for j in FRAG_SIZES if j < n}
    frag = _fragmentation(best_ring, _partner_sums(size, maxes))
    return ExactTables(
        n=n,
        bw=bw,
        key=key,
        ring=ring,
        order=order,
        neg_key=neg_key,
        positions=build_positions(order, n),
        best_ring=best_ring,
        frag=frag,
    )


def _partner_sums(size: int, maxes: HalfTables) -> list[int]:
    """P per mask (criterion 5): every GPU's fastest partner inside the mask, summed (0 below 2
    GPUs).

    O(2^n * n) once at start-up (about 0.2 s at 16 GPUs), so a request's tie-break is a lookup."""
    low, high, shift, low_mask = maxes.low, maxes.high, maxes.shift, maxes.low_mask
    sums = [0] * size
    for mask in range(size):
        if mask & (mask - 1) == 0:
            continue
        total = 0
        todo = mask
        while todo:
            bit = todo & -todo
            todo ^= bit
            v = bit.bit_length() - 1
            others = mask ^ bit
            a, b = low[v][others & low_mask], high[v][others >> shift]
            total += a if a > b else b
        sums[mask] = total
    return sums


def _fragmentation(best_ring: dict[int, list[int]], partner_sums: list[int]) -> list[int]:
    """frag(R) per mask, packed so that larger is better: Q8, Q4, Q2 of R, then P(R)."""
    rings = [best_ring.get(j) for j in FRAG_SIZES]
    return [
        pack_frag(tuple(0 if q is None else q[mask] for q in rings), partner_sums[mask])
        for mask in range(len(partner_sums))
    ]


def _rings(
    bw: tuple[tuple[int, ...], ...],
    popcount: list[int],
    min_pair: list[int],
    tiers: tuple[BandwidthTier, ...],
) -> list[int]:
    n = len(bw)
    size = 1 << n
    ring = [0] * size
    for mask in range(1, size):
        if popcount[mask] >= 2:
            # every cycle is at least this fast; raised below where possible
            ring[mask] = min_pair[mask]
    for tier in tiers[:-1]:  # at the smallest value every subset is a clique
        threshold = tier.min_mbps
        adjacency = [
            sum(1 << b for b in range(n) if b != a and bw[a][b] >= threshold) for a in range(n)
        ]
        component = _component_masks(n, tier)
        adjacency_by_bit = {1 << a: adjacency[a] for a in range(n)}
        reach = [0] * size
        for mask in range(1, size):
            low = mask & -mask
            rest = mask ^ low
            if not rest:
                reach[mask] = low
                continue
            if min_pair[mask] >= threshold:
                reach[mask] = rest  # a clique at this threshold: every order is a path
                continue
            if mask & ~component[low.bit_length() - 1]:
                continue  # spans two components: no Hamiltonian path, reach stays 0
            ends = 0
            todo = rest
            while todo:
                bit = todo & -todo
                if reach[mask ^ bit] & adjacency_by_bit[bit]:
                    ends |= bit
                todo ^= bit
            reach[mask] = ends
            if ring[mask] < threshold and popcount[mask] >= 3 and ends & adjacency_by_bit[low]:
                ring[mask] = threshold
    return ring


def _component_masks(n: int, tier: BandwidthTier) -> list[int]:
    """For each GPU, the bitmask of its group in the tier (the Topology computed the groups)."""
    masks = [0] * n
    for group in tier.groups:
        mask = sum(1 << v for v in group)
        for v in group:
            masks[v] = mask
    return masks


def _orders(
    n: int, key: list[int], popcount: list[int]
) -> tuple[tuple[list[int], ...], tuple[list[int], ...]]:
    """Masks of each size sorted by key descending, then by criterion 6 (lexicographically smallest
    first).

    For equal-size sets, the lexicographically smaller ascending index tuple is the one owning the
    lowest index where the two sets differ, i.e. the larger bit-reversed mask.
    """
    size = 1 << n
    reverse = [0] * size
    top = n - 1
    for mask in range(1, size):
        reverse[mask] = (reverse[mask >> 1] >> 1) | ((mask & 1) << top)
    by_size: list[list[int]] = [[] for _ in range(n + 1)]
    for mask in range(1, size):
        by_size[popcount[mask]].append((key[mask] << n) | reverse[mask])
    order: list[list[int]] = [[]]
    neg_key: list[list[int]] = [[]]
    low_bits = size - 1  # bit reversal is its own inverse: reverse[reverse[m]] == m
    for k in range(1, n + 1):
        packed = sorted(by_size[k], reverse=True)
        masks = [reverse[p & low_bits] for p in packed]
        order.append(masks)
        neg_key.append([-(p >> n) for p in packed])
    return tuple(order), tuple(neg_key)


def _best_ring_of_size(
    j: int, ring: list[int], popcount: list[int], maxes: HalfTables
) -> list[int]:
    """Qj per mask: the best ring of a j-subset (0 if the mask has fewer than j GPUs).

    Every j-subset of a mask with more than j GPUs misses one of the mask's j + 1 lowest GPUs, so
    Qj(S) is the maximum of Qj(S minus g) over those j + 1 GPUs g. For j = 2 the best pair is the
    running maximum of row maxima instead (O(1) per mask).
    """
    size = len(ring)
    best = [0] * size
    if j == 2:
        shift, low_mask = maxes.shift, maxes.low_mask
        for mask in range(1, size):
            low = mask & -mask
            rest = mask ^ low
            if rest:
                v = low.bit_length() - 1
                row = max(maxes.low[v][rest & low_mask], maxes.high[v][rest >> shift])
                best[mask] = row if row > best[rest] else best[rest]
        return best
    for mask in range(1, size):
        count = popcount[mask]
        if count < j:
            continue
        if count == j:
            best[mask] = ring[mask]
            continue
        value = 0
        todo = mask
        for _ in range(j + 1):
            bit = todo & -todo
            todo ^= bit
            candidate = best[mask ^ bit]
            if candidate > value:
                value = candidate
        best[mask] = value
    return best
