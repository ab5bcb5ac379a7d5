"""Which positions of each best-first list hold which GPU, as bitsets: a request's candidates in a
few big-int ops.

Boundary: built once at start-up from the exact tables' `order` lists
(device_plugin.gpu_sets.tables); read by the exact search (device_plugin.gpu_sets.exact). No
objective, no I/O.

A k-GPU set at position p of `order[k]` is a candidate for a request when it lies inside the
available GPUs and holds every must-include GPU. With one Python integer per (k, GPU) whose bit p
says "the set at position p lacks this GPU" (and one for "holds it"), the candidates of a request
are

    every position of order[k]  AND  lacking[g] for each unavailable g  AND  holding[m] for each
    must m,

at most n ANDs of len(order[k])-bit integers (12,870 bits at k = 8 of 16 GPUs), done at C speed, and
the best candidate is the lowest set bit. Scanning the list or enumerating the candidate sets costs
one Python-level step per set instead: up to 0.4 ms per request on 16 GPUs when few GPUs are free.
Memory: 2 x n x 2^n bits (256 KiB at 16 GPUs); start-up cost is printed by
benchmarks/bench_allocator.py.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress, islice

# _DIGITS[b] maps a byte to the digit "1" when its bit b is set, else "0" (a bytes.translate table).
_DIGITS = tuple(
    bytes(ord("1") if value >> b & 1 else ord("0") for value in range(256)) for b in range(8)
)
# candidates taken bit by bit; more are read from the block's bits as text, one C step each
_FEW = 64


@dataclass(frozen=True)
class PositionSets:
    """`holding[k][g]` / `lacking[k][g]`: bit p set iff order[k][p] holds / lacks GPU g; `every[k]`:
    all positions."""

    n: int
    holding: tuple[tuple[int, ...], ...]
    lacking: tuple[tuple[int, ...], ...]
    every: tuple[int, ...]

    def candidates(self, available: int, must: int, size: int) -> int:
        """Bitset of the positions in order[size] whose set lies inside `available` and holds
        `must`."""
        found = self.every[size]
        lacking, holding = self.lacking[size], self.holding[size]
        absent = ((1 << self.n) - 1) ^ available
        while absent:
            bit = absent & -absent
            found &= lacking[bit.bit_length() - 1]
            absent ^= bit
        while must:
            bit = must & -must
            found &= holding[bit.bit_length() - 1]
            must ^= bit
        return found


def first_position(found: int) -> int:
    """The lowest position in a non-empty candidate bitset (the best candidate: lists are best
    first)."""
    return (found & -found).bit_length() - 1


def members(found: int, order: Sequence[int], start: int, end: int, cap: int) -> list[int]:
    """The sets at the candidate positions in [start, end), in list order, at most `cap` of them."""
    window = (found >> start) & ((1 << (end - start)) - 1)
    # the usual case: a few candidates in a long block; one step each
    if window.bit_count() <= _FEW:
        out: list[int] = []
        while window and len(out) < cap:
            low = window & -window
            out.append(order[start + low.bit_length() - 1])
            window ^= low
        return out
    # bit 0 first; positions past the top set bit are not candidates
    flags = map("1".__eq__, bin(window)[:1:-1])
    return list(islice(compress(islice(order, start, end), flags), cap))


def build_positions(order: Sequence[Sequence[int]], n: int) -> PositionSets:
    """The bitsets of `order` (order[k] lists the k-GPU masks of an n-GPU node, order[0] is empty).

    At C speed: each list is packed as 16-bit masks, split into its low and high bytes, and each
    GPU's bit plane is read by translating those bytes into the digits of int(text, 2) (last
    position first).
    """
    if n > 16:
        raise ValueError(f"position bitsets cover at most 16 GPUs, got {n}")
    holding: list[tuple[int, ...]] = []
    lacking: list[tuple[int, ...]] = []
    every: list[int] = []
    for masks in order:
        full = (1 << len(masks)) - 1
        packed = array("H", reversed(masks)).tobytes()
        low, high = (
            (packed[0::2], packed[1::2])
            if sys.byteorder == "little"
            else (packed[1::2], packed[0::2])
        )
        held = tuple(
            int((low if gpu < 8 else high).translate(_DIGITS[gpu % 8]) or b"0", 2)
            for gpu in range(n)
        )
        holding.append(held)
        lacking.append(tuple(full ^ bits for bits in held))
        every.append(full)
    return PositionSets(n=n, holding=tuple(holding), lacking=tuple(lacking), every=tuple(every))
