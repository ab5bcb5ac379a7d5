"""ResourceManager health listeners: a failing one is contained, the change still lands and is heard."""

from __future__ import annotations

import logging

import pytest

from device_plugin.allocation_protocols import EnvVarResponseBuilder, LowestIndexPolicy
from device_plugin.composition import gpu_devices
from device_plugin.devices import Device, Health
from device_plugin.nvml.fake import FakeNvml
from device_plugin.resources import ResourceManager


def test_a_failing_listener_does_not_stop_the_change_or_the_listeners_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gpus = FakeNvml.from_machine("dgx1-v100").gpus()
    resource = ResourceManager("nvidia.com/gpu", gpu_devices(gpus), LowestIndexPolicy(), EnvVarResponseBuilder())
    heard: list[str] = []

    def broken(name: str, before: Device, after: Device) -> None:
        raise RuntimeError("a broken metrics hook")

    resource.add_health_listener(broken)
    resource.add_health_listener(lambda name, before, after: heard.append(after.id))
    with caplog.at_level(logging.ERROR):
        changed = resource.set_gpu_health(3, Health.UNHEALTHY, "Xid 79")
    assert changed == [gpus[3].uuid] == heard
    assert [d.id for d in resource.snapshot().devices if not d.healthy] == [gpus[3].uuid]
    assert "health listener failed" in caplog.text
