"""The hints the driver republishes as claims hold GPUs (dra/occupancy.py): rankedSet4A's group 0 is the
allocator's best 4-set among the free GPUs and no other group of it has 4 members; nothing changes while no
GPU is in use; singleGPURank ranks the free GPUs first."""

from __future__ import annotations

import pytest

from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.occupancy import is_whole_gpu, occupancy_overrides, with_values
from tests.allocation.machines import allocator_of
from tests.dra.machine_devices import devices_of

FOUR, RANK = f"{OWN_DOMAIN}/rankedSet4A", f"{OWN_DOMAIN}/singleGPURank"
CASES = [
    ("dgx1-v100", {0}),
    ("dgx1-v100", {1, 6}),
    ("pcie-8gpu-2socket", {0, 5}),
    ("pcie-8gpu-2nic", {0, 1}),
    ("hgx-h100", {4}),
]


def whole(machine: str) -> list[tuple[int, tuple]]:
    devices, _ = devices_of(machine)
    return [(d.gpu_index, d.attributes) for d in devices if is_whole_gpu(d.attributes)]


@pytest.mark.parametrize(("machine", "busy"), CASES, ids=[f"{m}-{'-'.join(map(str, sorted(b)))}" for m, b in CASES])
def test_the_first_4_gpu_grouping_offers_only_the_best_free_set(machine: str, busy: set[int]) -> None:
    allocator = allocator_of(machine)
    gpus = whole(machine)
    overrides = occupancy_overrides(allocator, gpus, busy, OWN_DOMAIN)
    carriers = {g for g, attrs in gpus if any(n == FOUR for n, _, _ in attrs)}
    assert {g for g, values in overrides.items() if FOUR in values} == carriers  # replaced, never added
    groups: dict[int, set[int]] = {}
    for gpu in carriers:
        groups.setdefault(overrides[gpu][FOUR], set()).add(gpu)
    free = [g for g, _ in gpus if g not in busy]
    assert groups[0] == set(allocator.allocate(free, [], 4))
    assert all(len(members) == 1 for value, members in groups.items() if value != 0)
    ranks = {gpu: values[RANK] for gpu, values in overrides.items()}
    assert sorted(ranks.values()) == list(range(len(gpus)))
    assert max(ranks[g] for g in free) < min(ranks[g] for g in busy)


def test_nothing_in_use_keeps_every_static_value() -> None:
    assert occupancy_overrides(allocator_of("dgx1-v100"), whole("dgx1-v100"), set(), OWN_DOMAIN) == {}


def test_fewer_than_4_free_leave_the_4_gpu_grouping_static() -> None:
    overrides = occupancy_overrides(allocator_of("dgx1-v100"), whole("dgx1-v100"), set(range(5)), OWN_DOMAIN)
    assert all(FOUR not in values and RANK in values for values in overrides.values())


def test_with_values_replaces_only_the_named_attributes() -> None:
    attributes = (("a", "int", 1), ("b", "int", 2), ("c", "string", "x"))
    assert with_values(attributes, {"b": 7}) == (("a", "int", 1), ("b", "int", 7), ("c", "string", "x"))


def test_a_best_set_with_a_gpu_the_grouping_left_out_keeps_the_static_grouping() -> None:
    gpus = whole("pcie-8gpu-2nic")
    carriers = {g for g, attrs in gpus if any(n == FOUR for n, _, _ in attrs)}
    allocator = allocator_of("pcie-8gpu-2nic")
    busy = {2, 3, 7}
    assert not set(allocator.allocate([g for g, _ in gpus if g not in busy], [], 4)) <= carriers
    assert all(FOUR not in v for v in occupancy_overrides(allocator, gpus, busy, OWN_DOMAIN).values())
