"""The exact search over precomputed tables (at most 16 GPUs): a few big-int operations per request.

`order[k]` lists every k-GPU set best first by criteria 1-4, ties in criterion-6 order. A set is a
candidate when it lies inside `available` and contains `must`. The candidates' positions in
`order[k]` come as one bitset from the per-GPU position bitsets (device_plugin.gpu_sets.positions:
one AND per unavailable or must-include GPU, at C speed, whatever the number of candidates); the
lowest position opens the top tie block of criteria 1-4, and its end is found by bisection on the
keys. Only the candidates of that block are compared on criterion 5 (fragmentation, a per-mask table
built at start-up), then criterion 6 (their order in the block: the first of equals is kept).

Bound: criterion 5 is evaluated over at most TIE_CAP tied candidates (the first ones in criterion-6
order). No shipped machine comes near it (its largest tie block is 140 sets); a 16-GPU machine with
one NVSwitch fabric would (12,870 ways to take 8 of 16 GPUs, all equal), and there the answer stays
optimal on criteria 1-4 and is exact on 4 among the first TIE_CAP sets.
"""

from __future__ import annotations

from bisect import bisect_right

from device_plugin.gpu_sets.positions import first_position, members
from device_plugin.gpu_sets.tables import ExactTables

TIE_CAP = 4096


def fragmentation(tables: ExactTables, remaining: int) -> int:
    """frag(R) of criterion 5, packed so that larger is better (precomputed per mask at
    start-up)."""
    return tables.frag[remaining]


def tie_block(
    tables: ExactTables, available: int, must: int, size: int, start: int = 0
) -> tuple[list[int], int]:
    """The candidates tied on criteria 1-4 at the first candidate position >= start, and the block's
    end.

    Returns ([], len) when no candidate is left. Candidates are in criterion-6 order.
    """
    order = tables.order[size]
    found = tables.positions.candidates(available, must, size) >> start << start
    if not found:
        return [], len(order)
    first = first_position(found)
    end = bisect_right(tables.neg_key[size], -tables.key[order[first]], first)
    if end - first == 1:
        return [order[first]], end
    return members(found, order, first, end, TIE_CAP), end


def pick(tables: ExactTables, available: int, block: list[int]) -> int:
    """Criterion 5 then 6 among a tie block (non-empty): one table lookup per candidate."""
    if len(block) == 1:
        return block[0]
    # at C speed, no key function
    scores = list(map(tables.frag.__getitem__, map(available.__xor__, block)))
    return block[scores.index(max(scores))]  # the first of equals: criterion 6


def search(tables: ExactTables, available: int, must: int, size: int) -> int:
    """The optimal set (mask) for a validated request."""
    block, _ = tie_block(tables, available, must, size)
    return pick(tables, available, block)


def ranked(tables: ExactTables, available: int, must: int, size: int, count: int) -> list[int]:
    """The best `count` candidates in full objective order (for explanations; not
    latency-critical)."""
    out: list[int] = []
    start = 0
    while len(out) < count:
        block, end = tie_block(tables, available, must, size, start)
        if not block:
            break
        # stable: keeps criterion 6
        block.sort(key=lambda m: fragmentation(tables, available ^ m), reverse=True)
        out.extend(block)
        start = end
    return out[:count]
