"""Property tests over random machines: validity, order independence, must_include, and the brute force."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from device_plugin.gpu_sets import Allocator
from tests.allocation.brute_force import BruteForce
from tests.allocation.random_machines import machine_descriptions, topology_from


@st.composite
def requests(draw: st.DrawFn, max_gpus: int = 8) -> tuple[dict[str, Any], list[int], list[int], int, int]:
    description = draw(machine_descriptions(max_gpus=max_gpus))
    n = len(description["gpus"])
    available = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    size = draw(st.integers(1, len(available)))
    must = draw(st.lists(st.sampled_from(available), max_size=size, unique=True))
    seed = draw(st.integers(0, 2**16))
    return description, available, must, size, seed


@settings(max_examples=60, deadline=None)
@given(requests())
def test_answer_is_valid_and_independent_of_input_order(
    request: tuple[dict[str, Any], list[int], list[int], int, int],
) -> None:
    description, available, must, size, seed = request
    allocator = Allocator(topology_from(description))
    got = allocator.allocate(available, must, size)
    assert len(got) == size
    assert list(got) == sorted(got)
    assert set(must) <= set(got) <= set(available)
    assert allocator.allocate(sorted(available, reverse=True), must[::-1], size) == got
    assert allocator.allocate(sorted(available, key=lambda g: (g * 7 + seed) % 11), must, size) == got


@settings(max_examples=40, deadline=None)
@given(requests(max_gpus=6))
def test_equals_brute_force_on_random_machines(
    request: tuple[dict[str, Any], list[int], list[int], int, int],
) -> None:
    description, available, must, size, _ = request
    topology = topology_from(description)
    expected = BruteForce(topology).best(set(available), set(must), size)
    assert Allocator(topology).allocate(available, must, size) == expected
