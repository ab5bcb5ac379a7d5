"""ReplicaPolicy: distributed vs packed over partial allocations, distinctness, topology, determinism."""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.sharing_model import Placement
from device_plugin.core.devices import Device
from device_plugin.core.errors import InvalidRequestError
from device_plugin.timeslice.policy import ReplicaPolicy
from device_plugin.timeslice.replicas import replica_devices
from testbed.allocation_doubles import EnvVarResponseBuilder
from tests.timeslice.node import base_devices, machine_gpus
from tests.validated import validated

DISTRIBUTED, PACKED = Placement.DISTRIBUTED, Placement.PACKED


def node(machine: str = "workstation-4gpu", replicas: int = 4) -> dict[str, Device]:
    devices = [r for base in base_devices(machine_gpus(machine)) for r in replica_devices(base, replicas)]
    return {d.id: d for d in devices}


def free_after(devices: Mapping[str, Device], allocated: Mapping[int, int]) -> list[str]:
    """Available IDs when GPU i already has allocated[i] replicas (its lowest ones) handed out."""
    taken: dict[int, int] = {}
    available = []
    for device_id, device in sorted(devices.items(), key=lambda kv: (kv[1].gpu_indices, kv[0])):
        gpu = device.gpu_indices[0]
        if taken.get(gpu, 0) < allocated.get(gpu, 0):
            taken[gpu] = taken.get(gpu, 0) + 1
        else:
            available.append(device_id)
    return available


def gpu_counts(devices: Mapping[str, Device], chosen: tuple[str, ...]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for device_id in chosen:
        gpu = devices[device_id].gpu_indices[0]
        counts[gpu] = counts.get(gpu, 0) + 1
    return counts


def replica_on(devices: Mapping[str, Device], available: list[str], gpu: int) -> str:
    return next(i for i in available if devices[i].gpu_indices == (gpu,))


CASES = [
    # (id, placement, allocated per GPU, size, expected replicas per GPU)
    ("distributed-fresh-spreads", DISTRIBUTED, {}, 2, {0: 1, 1: 1}),
    ("distributed-least-loaded-first", DISTRIBUTED, {0: 2, 1: 1}, 2, {2: 1, 3: 1}),
    ("distributed-then-next-load-tier", DISTRIBUTED, {0: 2, 1: 1}, 3, {1: 1, 2: 1, 3: 1}),
    ("distributed-second-round-least-loaded", DISTRIBUTED, {0: 1, 1: 1}, 6, {0: 1, 1: 1, 2: 2, 3: 2}),
    ("distributed-full-gpu-skipped", DISTRIBUTED, {0: 4}, 3, {1: 1, 2: 1, 3: 1}),
    ("distributed-only-one-gpu-free", DISTRIBUTED, {1: 4, 2: 4, 3: 4}, 3, {0: 3}),
    ("packed-fresh-fills-one-gpu", PACKED, {}, 3, {0: 3}),
    ("packed-most-loaded-first", PACKED, {1: 3, 2: 1}, 2, {1: 1, 2: 1}),
    ("packed-overflows-to-next-most-loaded", PACKED, {1: 2, 3: 1}, 4, {1: 2, 3: 2}),
]


@pytest.mark.parametrize(
    ("placement", "allocated", "size", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_placement_over_partial_allocations(
    placement: Placement, allocated: dict[int, int], size: int, expected: dict[int, int]
) -> None:
    devices = node()
    chosen = ReplicaPolicy(placement).choose(validated(devices, free_after(devices, allocated), [], size))
    assert gpu_counts(devices, chosen) == expected


@pytest.mark.parametrize(
    ("placement", "expected"),
    [(DISTRIBUTED, {2: 1, 0: 1}), (PACKED, {2: 2})],
    ids=["distributed-moves-away-from-must", "packed-joins-must"],
)
def test_must_include_is_honoured(placement: Placement, expected: dict[int, int]) -> None:
    devices = node()
    available = free_after(devices, {})
    must = [replica_on(devices, available, 2)]
    chosen = ReplicaPolicy(placement).choose(validated(devices, available, must, 2))
    assert must[0] in chosen
    assert gpu_counts(devices, chosen) == expected


DISTINCT = [
    ("distributed-distinct-fresh", DISTRIBUTED, {}, 4, {0: 1, 1: 1, 2: 1, 3: 1}),
    ("packed-distinct-most-loaded-gpus", PACKED, {1: 3, 2: 1}, 2, {1: 1, 2: 1}),
    ("packed-distinct-skips-full", PACKED, {1: 4, 2: 3, 0: 1}, 3, {2: 1, 0: 1, 3: 1}),
]


@pytest.mark.parametrize(
    ("placement", "allocated", "size", "expected"), [c[1:] for c in DISTINCT], ids=[c[0] for c in DISTINCT]
)
def test_require_distinct_places_one_replica_per_gpu(
    placement: Placement, allocated: dict[int, int], size: int, expected: dict[int, int]
) -> None:
    devices = node()
    chosen = ReplicaPolicy(placement, require_distinct=True).choose(
        validated(devices, free_after(devices, allocated), [], size)
    )
    assert gpu_counts(devices, chosen) == expected


def test_require_distinct_refuses_when_too_few_gpus_are_free() -> None:
    devices = node()
    available = free_after(devices, {0: 4, 1: 4})
    with pytest.raises(InvalidRequestError, match=r"requireDistinctGPUs.*only 2 distinct GPUs"):
        ReplicaPolicy(DISTRIBUTED, require_distinct=True, resource_name="nvidia.com/gpu").choose(
            validated(devices, available, [], 3)
        )


def test_require_distinct_refuses_must_include_on_one_gpu() -> None:
    devices = node()
    available = free_after(devices, {})
    must = [i for i in available if devices[i].gpu_indices == (1,)][:2]
    with pytest.raises(InvalidRequestError, match="must_include holds several replicas"):
        ReplicaPolicy(DISTRIBUTED, require_distinct=True).choose(validated(devices, available, must, 3))


class RecordingObjective:
    """A stand-in topology objective: prefers GPUs in `preferred` order, records its calls."""

    def __init__(self, preferred: tuple[int, ...]) -> None:
        self.preferred = preferred
        self.calls: list[tuple[tuple[int, ...], tuple[int, ...], int]] = []

    def __call__(self, candidates: tuple[int, ...], must: tuple[int, ...], count: int) -> tuple[int, ...]:
        self.calls.append((candidates, must, count))
        chosen = list(must)
        for gpu in self.preferred:
            if len(chosen) < count and gpu in candidates and gpu not in chosen:
                chosen.append(gpu)
        return tuple(sorted(chosen))


def test_topology_objective_chooses_among_equally_loaded_gpus() -> None:
    devices = node()
    objective = RecordingObjective((3, 1, 0, 2))
    chosen = ReplicaPolicy(DISTRIBUTED, choose_gpus=objective).choose(
        validated(devices, free_after(devices, {}), [], 2)
    )
    assert gpu_counts(devices, chosen) == {1: 1, 3: 1}
    assert objective.calls == [((0, 1, 2, 3), (), 2)]


def test_topology_objective_sees_gpus_already_held() -> None:
    devices = node()
    objective = RecordingObjective((2, 3, 1, 0))
    # GPU 0 is the only idle one: it is taken first; the second GPU comes from the load-2 tier.
    chosen = ReplicaPolicy(DISTRIBUTED, choose_gpus=objective).choose(
        validated(devices, free_after(devices, {1: 2, 2: 2, 3: 2}), [], 2)
    )
    assert gpu_counts(devices, chosen) == {0: 1, 2: 1}
    assert objective.calls == [((0, 1, 2, 3), (0,), 2)]


def test_topology_objective_not_consulted_without_a_choice() -> None:
    devices = node()
    objective = RecordingObjective((3, 2, 1, 0))
    ReplicaPolicy(DISTRIBUTED, choose_gpus=objective).choose(validated(devices, free_after(devices, {}), [], 4))
    assert objective.calls == []


@pytest.mark.parametrize(
    "objective",
    [lambda c, m, n: (99,) * n, lambda c, m, n: (), lambda c, m, n: 1 // 0],
    ids=["returns-unknown-gpus", "returns-too-few", "raises"],
)
def test_faulty_objective_falls_back_to_lowest_indices(objective: object) -> None:
    devices = node()
    chosen = ReplicaPolicy(DISTRIBUTED, choose_gpus=objective).choose(
        validated(  # type: ignore[arg-type]
            devices, free_after(devices, {}), [], 2
        )
    )
    assert gpu_counts(devices, chosen) == {0: 1, 1: 1}


@pytest.mark.parametrize(
    ("available", "must", "size", "message"),
    [
        (["nope::0"], [], 1, "unknown device"),
        ([], ["x"], 1, "must_include_deviceIDs not in available_deviceIDs"),
        (None, [], 0, "allocation_size must be positive"),
    ],
    ids=["unknown-available", "must-outside-available", "size-zero"],
)
def test_bad_input_is_refused_before_it_reaches_the_policy(
    available: list[str] | None, must: list[str], size: int, message: str
) -> None:
    # The one validation (the resource boundary) refuses it: a ReplicaPolicy is never handed such a request.
    devices = node()
    with pytest.raises(InvalidRequestError, match=message):
        validated(devices, free_after(devices, {}) if available is None else available, must, size)


@pytest.mark.parametrize("placement", list(Placement))
@pytest.mark.parametrize("seed", range(5))
def test_result_does_not_depend_on_available_order(placement: Placement, seed: int) -> None:
    devices = node("hgx-h100", 4)
    available = free_after(devices, {0: 1, 3: 2, 5: 3, 6: 1})
    must = [replica_on(devices, available, 3)]
    policy = ReplicaPolicy(placement)
    expected = policy.choose(validated(devices, available, must, 5))
    shuffled = available[:]
    random.Random(seed).shuffle(shuffled)
    assert policy.choose(validated(dict(reversed(list(devices.items()))), shuffled, must, 5)) == expected


@settings(max_examples=60, deadline=None)
@given(
    allocated=st.dictionaries(st.integers(0, 7), st.integers(0, 3), max_size=8),
    size=st.integers(1, 8),
    placement=st.sampled_from(list(Placement)),
    seed=st.integers(0, 2**16),
)
def test_choice_is_valid_and_spread_when_distributed(
    allocated: dict[int, int], size: int, placement: Placement, seed: int
) -> None:
    devices = node("dgx1-v100", 3)
    available = free_after(devices, allocated)
    assume(available)
    size = min(size, len(available))
    chosen = ReplicaPolicy(placement).choose(validated(devices, available, [], size))
    assert len(set(chosen)) == size and set(chosen) <= set(available)
    shuffled = available[:]
    random.Random(seed).shuffle(shuffled)
    assert ReplicaPolicy(placement).choose(validated(devices, shuffled, [], size)) == chosen
    if placement is DISTRIBUTED:
        gpus_with_room = {devices[i].gpu_indices for i in available}
        assert len({devices[i].gpu_indices for i in chosen}) == min(size, len(gpus_with_room))


def test_through_resource_manager() -> None:
    devices = node()
    manager = ResourceManager("nvidia.com/gpu", devices.values(), ReplicaPolicy(), EnvVarResponseBuilder())
    available = free_after(devices, {0: 1})
    shuffled = available[::-1]
    chosen = manager.preferred_allocation(shuffled, [], 3)
    assert gpu_counts(devices, chosen) == {1: 1, 2: 1, 3: 1}
