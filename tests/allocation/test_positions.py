"""The position bitsets of the exact search agree with filtering the best-first lists by hand.

device_plugin.gpu_sets.positions turns "which sets of order[k] lie inside `available` and hold `must`"
into ANDs of big integers; here every answer is compared with the plain list filter, on the 16-GPU
island machine (where lists are longest) for random requests, and on a made-up list small enough to
check every request. members() reads a block bit by bit when it has few candidates and as text when it
has many: both ways are checked against the filter.
"""

from __future__ import annotations

import random
from itertools import combinations

import pytest

from device_plugin.gpu_sets.positions import build_positions, first_position, members
from tests.allocation.machines import allocator_of


def _filtered(order: list[int], available: int, must: int) -> list[int]:
    return [p for p, mask in enumerate(order) if mask & ~available == 0 and mask & must == must]


def _bits(positions: list[int]) -> int:
    return sum(1 << p for p in positions)


def test_candidates_of_every_request_on_a_small_list_equal_the_filter() -> None:
    n = 5
    order = [[]] + [[sum(1 << g for g in c) for c in combinations(range(n), k)][::-1] for k in range(1, n + 1)]
    sets = build_positions(order, n)
    for available in range(1 << n):
        for must in range(1 << n):
            if must & ~available:
                continue
            for k in range(1, n + 1):
                assert sets.candidates(available, must, k) == _bits(_filtered(order[k], available, must))


@pytest.mark.parametrize("size", [1, 2, 4, 8, 12], ids=lambda k: f"size-{k}")
def test_candidates_first_and_members_on_island_16gpu_equal_the_filter(size: int) -> None:
    tables = allocator_of("island-16gpu")._tables
    assert tables is not None
    order = tables.order[size]
    rng = random.Random(f"positions/{size}")
    for _ in range(60):
        available = sum(1 << g for g in rng.sample(range(16), rng.randint(size, 16)))
        free = [g for g in range(16) if available >> g & 1]
        must = sum(1 << g for g in rng.sample(free, rng.randint(0, min(2, size))))
        expected = _filtered(order, available, must)
        found = tables.positions.candidates(available, must, size)
        assert found == _bits(expected)
        assert first_position(found) == expected[0]
        start, end = expected[0], rng.randint(expected[0] + 1, len(order))
        within = [order[p] for p in expected if start <= p < end]
        assert members(found, order, start, end, cap=len(order)) == within
        assert members(found, order, start, end, cap=3) == within[:3]


@pytest.mark.parametrize("candidates", [3, 64, 65, 500], ids=["few", "64-bit-by-bit", "65-as-text", "many"])
def test_members_reads_blocks_of_any_count_in_list_order(candidates: int) -> None:
    order = list(range(1000, 2000))
    rng = random.Random(candidates)
    positions = sorted(rng.sample(range(100, 900), candidates))
    found = _bits(positions)
    assert members(found, order, 100, 900, cap=10_000) == [order[p] for p in positions]
    assert members(found, order, positions[1], 900, cap=10_000) == [order[p] for p in positions[1:]]
