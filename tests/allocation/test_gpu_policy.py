"""TopologyPolicy: device IDs in, device IDs out, one log line and one hook call per decision."""

from __future__ import annotations

import logging
import random

import pytest

from device_plugin.allocation.whole_gpu_selection import TopologyPolicy, require_whole_gpus
from device_plugin.core.devices import Device
from device_plugin.core.errors import InvalidRequestError
from device_plugin.gpu_sets import Allocator
from device_plugin.gpu_sets.decision import AllocationDecision
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from tests.validated import validated


def _devices(machine: str) -> dict[str, Device]:
    gpus = FakeNvml.from_machine(machine).gpus()
    return {g.uuid: Device(id=g.uuid, gpu_indices=(g.index,), numa_node=g.numa_node) for g in gpus}


def test_policy_maps_ids_and_reports_the_decision(caplog: pytest.LogCaptureFixture) -> None:
    decisions: list[AllocationDecision] = []
    policy = TopologyPolicy(
        Allocator(build_topology(FakeNvml.from_machine("workstation-4gpu"))), on_decision=decisions.append
    )
    devices = _devices("workstation-4gpu")
    by_index = {d.gpu_indices[0]: d.id for d in devices.values()}
    available = [by_index[2], by_index[0], by_index[1]]  # kubelet order is arbitrary
    with caplog.at_level(logging.DEBUG, logger="device_plugin.allocation.whole_gpu_selection"):
        chosen = policy.choose(validated(devices, available, [], 1))
    assert chosen == (by_index[2],)
    assert [d.chosen for d in decisions] == [(2,)]
    # the selection's own lines: a thread an earlier test left running may log a WARNING meanwhile
    (line,) = [r.getMessage() for r in caplog.records if r.name == "device_plugin.allocation.whole_gpu_selection"]
    assert by_index[2] in line


def test_policy_honours_must_include() -> None:
    policy = TopologyPolicy(Allocator(build_topology(FakeNvml.from_machine("pcie-8gpu-2socket"))))
    devices = _devices("pcie-8gpu-2socket")
    by_index = {d.gpu_indices[0]: d.id for d in devices.values()}
    chosen = policy.choose(validated(devices, list(devices), [by_index[5]], 2))
    assert chosen == (by_index[4], by_index[5])


def test_a_failing_hook_does_not_fail_the_allocation() -> None:
    def broken(_: AllocationDecision) -> None:
        raise RuntimeError("metrics down")

    policy = TopologyPolicy(Allocator(build_topology(FakeNvml.from_machine("single-gpu"))), on_decision=broken)
    devices = _devices("single-gpu")
    assert policy.choose(validated(devices, list(devices), [], 1)) == tuple(devices)


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ({"a::0": Device("a::0", (0,), 0), "a::1": Device("a::1", (0,), 0)}, "are the same GPU 0"),
        ({"mig": Device("mig", (0, 1), 0)}, "is not one whole GPU"),
    ],
    ids=["replicas of one GPU are refused", "a device spanning GPUs is refused"],
)
def test_the_topology_policy_is_composed_over_whole_gpus_only(devices: dict[str, Device], message: str) -> None:
    # Checked once, when composition gives a resource this policy; requests then need no such check.
    with pytest.raises(ValueError, match=f"{message}.*whole-GPU resources only"):
        require_whole_gpus("nvidia.com/gpu", devices.values())


@pytest.mark.parametrize("machine", ["dgx1-v100", "island-16gpu", "pcie-8gpu-2socket"])
def test_describe_tells_the_chosen_set_and_whether_it_reaches_the_best_ring_whatever_the_order(machine: str) -> None:
    allocator = Allocator(build_topology(FakeNvml.from_machine(machine)))
    n = allocator.topology.gpu_count
    rng = random.Random(machine)
    for _ in range(40):
        available = sorted(rng.sample(range(n), rng.randint(1, n)))
        size = rng.randint(1, len(available))
        must = sorted(rng.sample(available, rng.randint(0, min(2, size))))
        chosen = allocator.allocate(available[::-1], must, size)
        decision = allocator.describe(chosen, len(available))
        assert (decision.chosen, decision.size, decision.available_count) == (chosen, size, len(available))
        assert decision.optimal == (decision.ring_bandwidth_gbps >= decision.best_possible_gbps)
        assert allocator.describe(chosen[::-1], len(available)) == decision


@pytest.mark.parametrize(
    ("chosen", "message"),
    [([], "an empty set is no allocation"), ([0, 0], "listed more than once"), ([8], "GPU 8 does not exist")],
    ids=["empty", "duplicate", "unknown-gpu"],
)
def test_describe_refuses_what_allocate_never_answers(chosen: list[int], message: str) -> None:
    allocator = Allocator(build_topology(FakeNvml.from_machine("dgx1-v100")))
    with pytest.raises(InvalidRequestError, match=message):
        allocator.describe(chosen, 8)
