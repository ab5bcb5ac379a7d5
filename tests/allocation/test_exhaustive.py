"""Every available subset, every size, a sample of must_include: the allocator equals the brute force.

Runs on every shipped machine of at most 8 GPUs. Also checks size, containment and that shuffling the
input lists changes nothing.
"""

from __future__ import annotations

import random
from itertools import combinations

import pytest

from tests.allocation.brute_force import BruteForce
from tests.allocation.machines import allocator_of, machines_up_to, topology_of

SMALL_MACHINES = machines_up_to(8)


def _must_samples(rng: random.Random, available: list[int], size: int) -> list[list[int]]:
    samples = [[]]
    if size >= 1:
        samples.append([rng.choice(available)])
    if size >= 2 and len(available) >= 2:
        samples.append(rng.sample(available, 2))
    return samples


@pytest.mark.parametrize("machine", SMALL_MACHINES)
def test_matches_brute_force_on_every_available_subset(machine: str) -> None:
    allocator = allocator_of(machine)
    brute = BruteForce(topology_of(machine))
    n = topology_of(machine).gpu_count
    rng = random.Random(f"exhaustive/{machine}")
    checked = 0
    for count in range(1, n + 1):
        for available in combinations(range(n), count):
            avail = list(available)
            for size in range(1, count + 1):
                for must in _must_samples(rng, avail, size):
                    expected = brute.best(set(avail), set(must), size)
                    shuffled = avail[:]
                    rng.shuffle(shuffled)
                    got = allocator.allocate(shuffled, list(reversed(must)), size)
                    assert got == expected, f"{machine}: available={avail} must={must} size={size}"
                    assert len(got) == size and set(must) <= set(got) <= set(avail)
                    checked += 1
    assert checked >= n  # the loops ran
