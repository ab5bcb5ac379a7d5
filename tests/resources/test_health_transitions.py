"""ResourceManager.on_health_transition: a typed GPU transition reaches every device that GPU backs."""

from __future__ import annotations

import pytest

from device_plugin.allocation.resources import ResourceManager
from device_plugin.core.devices import Device, Health
from device_plugin.health.state import HealthTransition
from device_plugin.nvml.fake.machine import FakeNvml
from testbed.allocation_doubles import EnvVarResponseBuilder, LowestIndexPolicy

GPUS = FakeNvml.from_machine("dgx1-v100").gpus()


def replicas(count: int) -> ResourceManager:
    devices = [Device(f"{g.uuid}::{n}", (g.index,), g.numa_node) for g in GPUS for n in range(count)]
    return ResourceManager("nvidia.com/gpu.shared", devices, LowestIndexPolicy(), EnvVarResponseBuilder())


def fail(index: int, xid: int | None = None) -> HealthTransition:
    return HealthTransition(index, Health.HEALTHY, Health.UNHEALTHY, f"Xid {xid}" if xid else "probe failed", 1.0, xid)


@pytest.mark.parametrize("count", [1, 4], ids=["one-device-per-gpu", "four-replicas-per-gpu"])
def test_a_transition_marks_every_device_of_its_gpu_and_returns_them(count: int) -> None:
    resource = replicas(count)
    before = resource.snapshot().version
    changed = resource.on_health_transition(fail(3, xid=79))
    assert changed == [f"{GPUS[3].uuid}::{n}" for n in range(count)]
    snapshot = resource.snapshot()
    assert snapshot.version == before + 1  # one wake-up for ListAndWatch, however many devices changed
    assert [(d.id, d.health_reason) for d in snapshot.devices if not d.healthy] == [(i, "Xid 79") for i in changed]


def test_a_repeated_or_foreign_transition_changes_nothing() -> None:
    resource = replicas(2)
    resource.on_health_transition(fail(3))
    version = resource.snapshot().version
    assert resource.on_health_transition(fail(3)) == []  # already Unhealthy
    assert resource.on_health_transition(fail(42)) == []  # a GPU this resource does not use
    assert resource.snapshot().version == version


def test_recovery_returns_the_devices_to_healthy() -> None:
    resource = replicas(2)
    resource.on_health_transition(fail(5))
    recovered = HealthTransition(5, Health.UNHEALTHY, Health.HEALTHY, "recovered: probes passed", 2.0)
    assert len(resource.on_health_transition(recovered)) == 2
    assert all(d.healthy for d in resource.snapshot().devices)
