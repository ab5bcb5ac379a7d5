"""The exact search over precomputed tables (at most 16 GPUs): one scan of a sorted list per request.

`order[k]` lists every k-GPU set best first by criteria 1-4, ties in criterion-6 order. A set is a
candidate when it lies inside `available` and contains `must`, i.e. (set & sel) == must with
sel = not-available | must. The first candidate (found at C speed by operator.indexOf over a map)
opens the top tie block of criteria 1-4; its end is found by bisection on the keys. When the
candidates are few compared with the list (few GPUs free), they are enumerated instead and sorted by
their precomputed rank in `order[k]`, which gives the same tie block without scanning the list. Only the
candidates of that block are compared on criterion 5 (fragmentation, a per-mask table built at start-up),
then criterion 6 (their order in the block, Python's max keeps the first of equals).

Bound: criterion 5 is evaluated over at most TIE_CAP tied candidates (the first ones in criterion-6
order). No shipped machine comes near it (its largest tie block is 140 sets); a 16-GPU machine with
one NVSwitch fabric would (12,870 ways to take 8 of 16 GPUs, all equal), and there the answer stays
optimal on criteria 1-4 and is exact on 4 among the first TIE_CAP sets.
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from itertools import combinations, islice
from math import comb

from device_plugin.allocator.tables import ExactTables

TIE_CAP = 4096
# Enumerating a candidate costs about as much as scanning this many list entries.
_ENUMERATE_COST = 12


def fragmentation(tables: ExactTables, remaining: int) -> int:
    """frag(R) of criterion 5, packed so that larger is better (precomputed per mask at start-up)."""
    return tables.frag[remaining]


def tie_block(tables: ExactTables, available: int, must: int, size: int, start: int = 0) -> tuple[list[int], int]:
    """The candidates tied on criteria 1-4 at the first candidate position >= start, and the block's end.

    Returns ([], len) when no candidate is left. Candidates are in criterion-6 order.
    """
    order = tables.order[size]
    sel = (((1 << tables.n) - 1) ^ available) | must
    try:
        first = operator.indexOf(map(sel.__and__, islice(order, start, None)), must) + start
    except ValueError:
        return [], len(order)
    end = bisect_right(tables.neg_key[size], -tables.key[order[first]], first)
    if end - first == 1:
        return [order[first]], end
    block = [m for m in islice(order, first, end) if m & sel == must]
    return block[:TIE_CAP], end


def pick(tables: ExactTables, available: int, block: list[int]) -> int:
    """Criterion 5 then 6 among a tie block (non-empty): one table lookup per candidate."""
    if len(block) == 1:
        return block[0]
    frag = tables.frag
    return max(block, key=lambda m: frag[available ^ m])  # max keeps the first of equals: criterion 6


def _enumerated_block(tables: ExactTables, available: int, must: int, size: int) -> list[int] | None:
    """The top tie block by enumerating the candidates, or None when scanning the list is cheaper."""
    free = available & ~must
    free_count, needed = free.bit_count(), size - must.bit_count()
    if comb(free_count, needed) * _ENUMERATE_COST >= len(tables.order[size]):
        return None
    bits = []
    while free:
        bit = free & -free
        bits.append(bit)
        free ^= bit
    candidates = sorted((must + sum(c) for c in combinations(bits, needed)), key=tables.rank.__getitem__)
    key, top = tables.key, tables.key[candidates[0]]
    block = [m for m in islice(candidates, TIE_CAP) if key[m] == top]
    return block


def search(tables: ExactTables, available: int, must: int, size: int) -> int:
    """The optimal set (mask) for a validated request."""
    block = _enumerated_block(tables, available, must, size)
    if block is None:
        block, _ = tie_block(tables, available, must, size)
    return pick(tables, available, block)


def ranked(tables: ExactTables, available: int, must: int, size: int, count: int) -> list[int]:
    """The best `count` candidates in full objective order (for explanations; not latency-critical)."""
    out: list[int] = []
    start = 0
    while len(out) < count:
        block, end = tie_block(tables, available, must, size, start)
        if not block:
            break
        block.sort(key=lambda m: fragmentation(tables, available ^ m), reverse=True)  # stable: keeps criterion 6
        out.extend(block)
        start = end
    return out[:count]
