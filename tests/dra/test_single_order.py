"""singleGPURank: the order one-GPU claims take whole GPUs in, published on every whole GPU (issue 33)."""

from __future__ import annotations

import pytest

from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.single_order import single_gpu_order
from device_plugin.nvml.catalog import shipped_machine_names
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
