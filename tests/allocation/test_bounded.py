"""Above 16 GPUs: the bounded search always returns a valid set, and a good one on island machines."""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from device_plugin.gpu_sets import Allocator
from tests.allocation.random_machines import topology_from


def _islands(count: int, per_island: int) -> dict[str, Any]:
    gpus = [
        {
            "model": "NVIDIA H100 80GB HBM3",
            "memory_mib": 81559,
            "numa_node": i // per_island,
            "pcie": [f"cpu{i // per_island}", f"cpu{i // per_island}-rp{i % per_island // 2}"],
        }
        for i in range(count * per_island)
    ]
    domains = [{"gpus": list(range(d * per_island, (d + 1) * per_island)), "links_per_gpu": 18} for d in range(count)]
    return {"name": "islands", "gpus": gpus, "nvswitch": domains}


@cache
def _allocator() -> Allocator:
    return Allocator(topology_from(_islands(3, 8)))  # 24 GPUs: three NVSwitch islands


def test_24_gpus_use_the_bounded_search() -> None:
    assert not _allocator().exact


def test_bounded_takes_a_whole_intact_island() -> None:
    available = [g for g in range(24) if g != 2]
    assert _allocator().allocate(available, [], 8) == tuple(range(8, 16))


def test_bounded_single_gpu_comes_from_the_broken_island() -> None:
    available = [g for g in range(24) if g not in (9, 10)]
    assert _allocator().allocate(available, [], 1) == (8,)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_bounded_answer_is_valid_and_order_independent(data: st.DataObject) -> None:
    available = data.draw(st.lists(st.integers(0, 23), min_size=1, max_size=24, unique=True))
    size = data.draw(st.integers(1, len(available)))
    must = data.draw(st.lists(st.sampled_from(available), max_size=size, unique=True))
    got = _allocator().allocate(available, must, size)
    assert len(got) == size and set(must) <= set(got) <= set(available)
    assert _allocator().allocate(available[::-1], must[::-1], size) == got
