"""GetPreferredAllocation for MIG devices: spread vs pack over parent GPUs, determinism, must_include."""

from __future__ import annotations

import random

import pytest

from device_plugin.allocation.gpu_choice import lowest_index_gpus
from device_plugin.config.loader import load_config
from device_plugin.config.sharing_model import Placement
from device_plugin.core.devices import Device
from device_plugin.core.errors import ConfigError
from device_plugin.mig.discovery import discover
from device_plugin.mig.policy import MigAllocationPolicy
from device_plugin.mig.strategy import build_resources
from device_plugin.nvml.fake.machine import FakeNvml
from tests.validated import validated


def resource(machine: str, strategy: str, name: str) -> dict[str, Device]:
    inventory = discover(FakeNvml.from_machine(machine))
    devices = build_resources(inventory.gpus, inventory.devices_by_gpu, strategy)[name]
    return {d.id: d for d in devices}


A100 = resource("a100-mig-7x1g", "mixed", "nvidia.com/mig-1g.5gb")


def ids_on(devices: dict[str, Device], gpu: int) -> list[str]:
    return sorted(i for i, d in devices.items() if d.gpu_indices == (gpu,))


def parents(devices: dict[str, Device], chosen: tuple[str, ...]) -> list[int]:
    return sorted(devices[i].gpu_indices[0] for i in chosen)


def test_spread_lands_one_device_per_gpu() -> None:
    chosen = MigAllocationPolicy().choose(validated(A100, sorted(A100), [], 4))
    assert parents(A100, chosen) == [0, 1, 2, 3]


def test_spread_prefers_the_least_loaded_gpus() -> None:
    taken = set(ids_on(A100, 0)[:3] + ids_on(A100, 1)[:1])  # other containers hold 3 on GPU 0, 1 on GPU 1
    available = sorted(set(A100) - taken)
    policy = MigAllocationPolicy()
    assert parents(A100, policy.choose(validated(A100, available, [], 6))) == [2, 3, 4, 5, 6, 7]
    assert parents(A100, policy.choose(validated(A100, available, [], 7))) == [1, 2, 3, 4, 5, 6, 7]
    assert parents(A100, policy.choose(validated(A100, available, [], 9))) == [0, 1, 2, 2, 3, 4, 5, 6, 7]


def test_pack_fills_the_busiest_gpu_first() -> None:
    taken = set(ids_on(A100, 5)[:2])
    available = sorted(set(A100) - taken)
    chosen = MigAllocationPolicy(Placement.PACKED).choose(validated(A100, available, [], 6))
    assert parents(A100, chosen) == [0, 5, 5, 5, 5, 5]  # GPU 5 filled, then the lowest empty one


def test_pack_stays_on_the_gpu_of_must_include() -> None:
    must = [ids_on(A100, 6)[2]]
    chosen = MigAllocationPolicy(Placement.PACKED).choose(validated(A100, sorted(A100), must, 3))
    assert must[0] in chosen
    assert parents(A100, chosen) == [6, 6, 6]


def test_spread_with_must_include_goes_to_other_gpus_next() -> None:
    must = [ids_on(A100, 2)[0], ids_on(A100, 2)[1]]
    chosen = MigAllocationPolicy().choose(validated(A100, sorted(A100), must, 4))
    assert set(must) <= set(chosen)
    assert parents(A100, chosen) == [0, 1, 2, 2]


def test_choose_gpus_decides_among_tied_gpus() -> None:
    calls: list[tuple] = []

    def far_gpus(candidates: tuple[int, ...], must: tuple[int, ...], count: int) -> tuple[int, ...]:
        calls.append((candidates, must, count))
        return tuple(sorted(set(must) | set(sorted(candidates, reverse=True)[: count - len(must)])))

    chosen = MigAllocationPolicy(choose_gpus=far_gpus).choose(validated(A100, sorted(A100), [], 3))
    assert parents(A100, chosen) == [5, 6, 7]
    assert calls == [((0, 1, 2, 3, 4, 5, 6, 7), (), 3)]


def test_an_invalid_choose_gpus_answer_falls_back_to_lowest(caplog: pytest.LogCaptureFixture) -> None:
    chosen = MigAllocationPolicy(choose_gpus=lambda c, m, n: (99,)).choose(validated(A100, sorted(A100), [], 2))
    assert parents(A100, chosen) == [0, 1]
    assert any("falling back" in r.message for r in caplog.records)


@pytest.mark.parametrize("placement", list(Placement), ids=[p.value for p in Placement])
@pytest.mark.parametrize("size", [1, 3, 9, 20])
def test_answer_does_not_depend_on_input_order(placement: Placement, size: int) -> None:
    rng = random.Random(size)
    available = sorted(set(A100) - set(rng.sample(sorted(A100), 10)))
    policy = MigAllocationPolicy(placement)
    expected = policy.choose(validated(A100, available, available[:1], size))
    for _ in range(5):
        shuffled = available[:]
        rng.shuffle(shuffled)
        shuffled_devices = dict(rng.sample(sorted(A100.items()), len(A100)))
        assert policy.choose(validated(shuffled_devices, shuffled, available[:1], size)) == expected
    assert len(expected) == size and set(expected) <= set(available) and available[0] in expected


def test_mixed_resource_spreads_over_the_gpus_that_offer_the_profile() -> None:
    two_g = resource("h100-mig-mixed", "mixed", "nvidia.com/mig-2g.20gb")  # 2 on GPU 0, 1 on GPU 2
    chosen = MigAllocationPolicy().choose(validated(two_g, sorted(two_g), [], 2))
    assert parents(two_g, chosen) == [0, 2]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("distributed", Placement.DISTRIBUTED), ("packed", Placement.PACKED)],
    ids=["nvidia-distributed", "nvidia-packed"],
)
def test_one_config_field_names_the_placement_of_mig_and_time_slicing_alike(value: str, expected: Placement) -> None:
    config = load_config(config_file=None, env={"SHARED_DEVICES_ALLOCATION_POLICY": value})
    assert Placement(config.flags.plugin.shared_devices_allocation_policy) is expected


def test_a_placement_nvidia_does_not_name_is_refused_when_the_config_loads() -> None:
    with pytest.raises(ConfigError, match="sharedDevicesAllocationPolicy"):
        load_config(config_file=None, env={"SHARED_DEVICES_ALLOCATION_POLICY": "spread"})


def test_lowest_index_gpus_keeps_must() -> None:
    assert lowest_index_gpus((0, 1, 2, 3), (3,), 2) == (0, 3)
