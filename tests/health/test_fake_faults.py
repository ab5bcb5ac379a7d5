"""FakeNvml's health side: event watches, the backlog, sticky faults and injected NVML failures."""

from __future__ import annotations

import threading

import pytest

from device_plugin.core.errors import NvmlError
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind, HealthSource, ProbeResult

XID_48 = HealthEvent(2, HealthEventKind.XID, xid=48)


def test_the_fake_is_a_health_source(fake: FakeNvml) -> None:
    assert isinstance(fake, HealthSource)


def test_an_injected_event_wakes_a_waiting_watch(fake: FakeNvml) -> None:
    watch = fake.open_event_watch((0, 1, 2))
    got: list[HealthEvent | None] = []
    reader = threading.Thread(target=lambda: got.append(watch.wait(10.0)))
    reader.start()
    fake.test_hooks.inject(XID_48)
    reader.join(10.0)
    assert got == [XID_48]
    assert watch.wait(0.01) is None


def test_events_for_unwatched_gpus_wait_for_a_watch(fake: FakeNvml) -> None:
    fake.test_hooks.inject(XID_48)
    other = fake.open_event_watch((0, 1))
    assert other.wait(0.01) is None
    later = fake.open_event_watch((2,))
    assert later.wait(0.01) == XID_48


def test_every_watch_covering_the_gpu_gets_the_event(fake: FakeNvml) -> None:
    first, second = fake.open_event_watch((2,)), fake.open_event_watch((2, 3))
    fake.test_hooks.inject(XID_48)
    assert (first.wait(0.01), second.wait(0.01)) == (XID_48, XID_48)


STICKY = [
    ("xid-79-is-lost", HealthEvent(5, HealthEventKind.XID, xid=79), "GPU is lost"),
    ("lost", HealthEvent(5, HealthEventKind.LOST), "GPU is lost"),
    ("double-bit-ecc-pends-retirement", HealthEvent(5, HealthEventKind.DOUBLE_BIT_ECC), "retired pages pending"),
]


@pytest.mark.parametrize(("event", "reason"), [s[1:] for s in STICKY], ids=[s[0] for s in STICKY])
def test_sticky_faults_fail_probes_until_recovered(fake: FakeNvml, event: HealthEvent, reason: str) -> None:
    fake.test_hooks.inject(event)
    failed = fake.probe(5)
    assert not failed.ok and reason in failed.reason
    assert fake.probe(4) == ProbeResult(4, True)
    fake.test_hooks.recover(5)
    assert fake.probe(5) == ProbeResult(5, True)


def test_other_xids_leave_probes_passing(fake: FakeNvml) -> None:
    fake.test_hooks.inject(XID_48)
    assert fake.probe(2).ok


def test_probe_failure_without_an_event(fake: FakeNvml) -> None:
    fake.test_hooks.set_probe_failure(1, "row remapping failed (nvmlDeviceGetRemappedRows)")
    assert fake.probe(1) == ProbeResult(1, False, "row remapping failed (nvmlDeviceGetRemappedRows)")
    fake.test_hooks.set_probe_failure(1, None)
    assert fake.probe(1).ok


def test_injected_nvml_failures(fake: FakeNvml) -> None:
    fake.test_hooks.fail_event_set_creation("NVML Unknown Error")
    with pytest.raises(NvmlError, match="nvmlEventSetCreate"):
        fake.open_event_watch((0,))
    fake.test_hooks.fail_event_set_creation(None)
    fake.test_hooks.fail_registration(1, "Not Supported")
    watch = fake.open_event_watch((0, 1))
    assert dict(watch.registration_failures) == {1: "nvmlDeviceRegisterEvents failed: Not Supported"}
    fake.test_hooks.fail_event_wait("GPU is lost")
    with pytest.raises(NvmlError, match="nvmlEventSetWait_v2"):
        watch.wait(0.01)
    fake.test_hooks.fail_event_wait(None)
    assert watch.wait(0.01) is None
    watch.close()
    with pytest.raises(NvmlError):
        watch.wait(0.01)


@pytest.mark.parametrize("index", [-1, 8, True], ids=["negative", "past-the-end", "bool"])
def test_injection_on_a_gpu_the_machine_lacks_is_refused(fake: FakeNvml, index: int) -> None:
    with pytest.raises(NvmlError, match="no GPU with index"):
        fake.test_hooks.set_lost(index)


def test_a_closed_backend_fails_probes_and_watches(fake: FakeNvml) -> None:
    fake.close()
    assert not fake.probe(0).ok
    with pytest.raises(NvmlError):
        fake.open_event_watch((0,))
