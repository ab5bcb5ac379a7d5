"""HealthWatcher over a FakeNvml and real ResourceManagers: a backend that fails makes GPUs Unhealthy, not silent.

An event set that cannot be created, an event wait that fails, a GPU whose events cannot be registered, a
probe that raises (an NvmlError or a bug): each marks the GPUs it leaves unwatched Unhealthy with the reason,
the watcher keeps running, and they recover once the backend does. Waits use
ResourceManager.wait_for_change with generous bounds; nothing here measures time.
"""

from __future__ import annotations

from device_plugin.allocation.resources import ResourceManager
from device_plugin.core.errors import NvmlError
from device_plugin.health.watcher import HealthWatcher
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind, ProbeResult

from .conftest import Flaky, gpus_are, start, wait_until


def test_event_set_creation_failure_fails_closed_and_retries(fake: FakeNvml, managers: list[ResourceManager]) -> None:
    fake.test_hooks.fail_event_set_creation("NVML Unknown Error")
    watcher = start(fake, managers)
    try:
        snapshot = wait_until(managers[0], gpus_are(set(range(8))))
        assert {d.health_reason for d in snapshot.devices} == {
            "health watch failed: event set cannot be created: NVML nvmlEventSetCreate failed: NVML Unknown Error"
        }
        fake.test_hooks.fail_event_set_creation(None)
        wait_until(managers[0], gpus_are(set()))
        wait_until(managers[2], gpus_are(set()))
    finally:
        watcher.stop()


def test_a_failing_event_wait_fails_closed_then_recovers(
    fake: FakeNvml, managers: list[ResourceManager], watcher: HealthWatcher
) -> None:
    fake.test_hooks.fail_event_wait("GPU is lost")
    snapshot = wait_until(managers[1], gpus_are(set(range(8))))
    assert all("event wait failed" in d.health_reason for d in snapshot.devices)
    fake.test_hooks.fail_event_wait(None)
    wait_until(managers[1], gpus_are(set()))


def test_a_gpu_whose_events_cannot_be_registered_is_unhealthy_until_it_can(
    fake: FakeNvml, managers: list[ResourceManager]
) -> None:
    fake.test_hooks.fail_registration(6, "Unknown Error")
    watcher = start(fake, managers)
    try:
        snapshot = wait_until(managers[0], gpus_are({6}))
        assert [d.health_reason for d in snapshot.devices if not d.healthy] == [
            "health watch failed: nvmlDeviceRegisterEvents failed: Unknown Error"
        ]
        fake.test_hooks.fail_registration(6, None)
        wait_until(managers[0], gpus_are(set()))
    finally:
        watcher.stop()


def test_backend_exceptions_mid_run_never_end_the_watcher(fake: FakeNvml, managers: list[ResourceManager]) -> None:
    source = Flaky(fake)
    watcher = start(source, managers)
    try:
        source.broken.set()
        snapshot = wait_until(managers[0], gpus_are(set(range(8))))
        assert all("ZeroDivisionError" in d.health_reason for d in snapshot.devices)
        source.broken.clear()
        wait_until(managers[0], gpus_are(set()))
        fake.test_hooks.inject(HealthEvent(2, HealthEventKind.XID, xid=94))  # the event thread still runs
        wait_until(managers[0], gpus_are({2}))
    finally:
        watcher.stop()


def test_a_probe_raising_nvml_error_is_a_failed_probe(fake: FakeNvml, managers: list[ResourceManager]) -> None:
    class Raising(Flaky):
        def probe(self, index: int) -> ProbeResult:
            if index == 7:
                raise NvmlError("nvmlDeviceGetHandleByUUID", "GPU is lost", device="GPU 7", code=15)
            return self.fake.probe(index)

    watcher = start(Raising(fake), managers)
    try:
        snapshot = wait_until(managers[0], gpus_are({7}))
        assert [d.health_reason for d in snapshot.devices if not d.healthy] == [
            "probe failed: NVML nvmlDeviceGetHandleByUUID on GPU 7 failed: GPU is lost"
        ]
    finally:
        watcher.stop()
