"""The optimal share packer the packing benchmark judges by: exact on cases whose answer is known."""

from __future__ import annotations

import itertools
import random

import pytest

from testbed.share_packing import min_gpus

CASES = [
    pytest.param([], 100, 0, id="nothing"),
    pytest.param([60, 40], 100, 1, id="two-that-fill-one"),
    pytest.param([60, 50], 100, 2, id="two-that-do-not"),
    # first fit decreasing needs 3 (50+40 | 30+30+25 | 25); 50+25+25 and 40+30+30 fill two
    pytest.param([50, 40, 30, 30, 25, 25], 100, 2, id="ffd-is-not-optimal"),
    pytest.param([34] * 6, 100, 3, id="two-a-gpu"),
]


@pytest.mark.parametrize(("shares", "gpu", "expected"), CASES)
def test_min_gpus_is_exact(shares: list[int], gpu: int, expected: int) -> None:
    assert min_gpus(shares, gpu) == expected


def test_min_gpus_matches_brute_force_on_random_sets() -> None:
    rng = random.Random(7)
    for _ in range(40):
        shares = [rng.choice([10, 20, 25, 30, 40, 55]) for _ in range(rng.randint(1, 6))]
        brute = min(
            len(set(assignment))
            for assignment in itertools.product(range(len(shares)), repeat=len(shares))
            if all(
                sum(s for s, g in zip(shares, assignment, strict=True) if g == gpu) <= 100 for gpu in set(assignment)
            )
        )
        assert min_gpus(shares, 100) == brute, shares


def test_a_share_larger_than_a_gpu_is_refused() -> None:
    with pytest.raises(ValueError, match="larger than a GPU"):
        min_gpus([120], 100)
