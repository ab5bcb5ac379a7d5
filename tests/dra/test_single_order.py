"""singleGPURank: the order one-GPU claims take whole GPUs in, published on every whole GPU (issue 33)."""

from __future__ import annotations

import pytest

from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.single_order import occupancy_ranks, single_gpu_order
from device_plugin.nvml.fake.catalog import shipped_machine_names
from tests.allocation.machines import allocator_of, topology_of
from tests.dra.machine_devices import devices_of

MACHINES = shipped_machine_names()
RANK = f"{OWN_DOMAIN}/singleGPURank"


def ranks(machine: str) -> dict[int, int]:
    devices, _ = devices_of(machine)
    return {d.gpu_index: dict((n, v) for n, _, v in d.attributes)[RANK] for d in devices if d.name.count("-") == 1}


@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
def test_every_whole_gpu_has_a_rank_and_the_ranks_are_0_to_n_minus_1(machine: str) -> None:
    devices, _ = devices_of(machine)
    whole = [d for d in devices if d.name.count("-") == 1]
    assert sorted(ranks(machine).values()) == list(range(len(whole)))
    assert all(RANK not in dict((n, v) for n, _, v in d.attributes) for d in devices if d.name.count("-") > 1)


@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
def test_gpus_without_a_gpudirect_close_nic_rank_before_the_nic_close_ones(machine: str) -> None:
    topology = topology_of(machine)
    ranked = ranks(machine)
    close = {g for g in ranked if topology.close_nics(g)}
    apart = set(ranked) - close
    if close and apart:
        assert max(ranked[g] for g in apart) < min(ranked[g] for g in close)


@pytest.mark.parametrize("machine", ["pcie-8gpu-2nic", "dgx1-v100", "island-16gpu"])
def test_rank_0_is_as_good_as_the_allocators_own_choice_on_the_empty_node(machine: str) -> None:
    allocator = allocator_of(machine)
    gpus = list(range(topology_of(machine).gpu_count))
    first = single_gpu_order(allocator, gpus)[0]
    own = allocator.explain(gpus, [], 1).chosen
    got = allocator.explain(gpus, [first], 1).chosen
    assert (got.score, got.fragmentation) == (own.score, own.fragmentation)


def test_the_order_does_not_depend_on_the_order_gpus_are_given_in() -> None:
    allocator = allocator_of("dgx1-v100")
    assert single_gpu_order(allocator, [7, 3, 5, 1, 0, 2, 6, 4]) == single_gpu_order(allocator, list(range(8)))


def _as_good_as_the_allocators(machine: str, free: list[int], gpu: int) -> bool:
    allocator = allocator_of(machine)
    own = allocator.explain(free, [], 1).chosen
    got = allocator.explain(free, [gpu], 1).chosen
    return (got.score, got.fragmentation) == (own.score, own.fragmentation)


OCCUPANCY = [  # (machine, GPUs in use)
    ("dgx1-v100", {0}),
    ("dgx1-v100", {0, 1, 2, 5}),
    ("pcie-8gpu-2nic", {4, 5}),
    ("pcie-8gpu-2socket", {0, 3, 6}),
    ("island-16gpu", {0, 8, 9}),
]


@pytest.mark.parametrize(
    ("machine", "busy"), OCCUPANCY, ids=[f"{m}-{'-'.join(map(str, sorted(b)))}-in-use" for m, b in OCCUPANCY]
)
def test_with_gpus_in_use_rank_0_and_1_are_the_allocators_choices_and_the_busy_ones_rank_last(
    machine: str, busy: set[int]
) -> None:
    static = ranks(machine)
    ranked = occupancy_ranks(allocator_of(machine), static, busy)
    order = sorted(ranked, key=ranked.__getitem__)
    free = [g for g in static if g not in busy]
    assert sorted(ranked.values()) == list(range(len(static)))
    assert set(order[len(free) :]) == busy and order[len(free) :] == sorted(busy, key=static.__getitem__)
    assert _as_good_as_the_allocators(machine, free, order[0])
    assert _as_good_as_the_allocators(machine, [g for g in free if g != order[0]], order[1])


def test_with_every_gpu_in_use_the_static_order_stays() -> None:
    static = ranks("dgx1-v100")
    assert occupancy_ranks(allocator_of("dgx1-v100"), static, set(static)) == static
