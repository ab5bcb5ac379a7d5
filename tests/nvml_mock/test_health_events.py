"""The health side of the real backend on the mock, faults written while it runs: Xid 79 with the GPU lost, ECC
uncorrectable errors with Xid 48, a GPU fallen off the bus, and recovery when the fault is cleared. The event
watch and the probes are RealNvml's (device_plugin/nvml/real/health.py); the daemon's reaction is
test_daemon.py's."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from tests.nvml_mock.conftest import eventually
from tests.nvml_mock.remote import MockHost, RemoteBackend, RemoteEventWatch

pytestmark = pytest.mark.nvml_mock
WAIT_S = 5.0
MOCK_INSTANCE_IDS = "MIG GPU instance 0, compute instance 0"  # see test_mock_limit_...


def watched(own_host: Callable[[str], MockHost], profile: str) -> tuple[MockHost, RemoteBackend, RemoteEventWatch]:
    host = own_host(profile)
    backend = host.open_backend()
    watch = backend.open_event_watch(tuple(gpu.index for gpu in backend.gpus()))
    assert watch.registration_failures == {}
    return host, backend, watch


def next_event(watch: RemoteEventWatch) -> HealthEvent:
    for _ in range(int(WAIT_S / 0.25)):
        event = watch.wait(0.25)
        if event is not None:
            return event
    raise AssertionError("no event arrived")


def test_a_lost_gpus_xid_79_is_reported_for_that_gpu(own_host: Callable[[str], MockHost]) -> None:
    """The event's source is named without asking NVML about it: a lost GPU answers GPU_IS_LOST to every call,
    and asking it for its UUID turned its own Xid 79 into a failed wait (every GPU Unhealthy at once)."""
    host, backend, watch = watched(own_host, "h100")
    host.inject({2: {"failure": {"mode": "lost", "xid": {"code": 79}}}})
    eventually(lambda: backend.probe(2).lost, "GPU 2 is never lost")
    event = next_event(watch)
    assert (event.gpu_index, event.kind, event.xid) == (2, HealthEventKind.XID, 79)


def test_ecc_uncorrectable_gives_xid_48_and_a_failed_row_remapping(own_host: Callable[[str], MockHost]) -> None:
    host, backend, watch = watched(own_host, "a100")
    host.inject({5: {"failure": {"mode": "ecc_uncorrectable", "xid": {"code": 48}}}})
    eventually(lambda: not backend.probe(5).ok, "GPU 5's probe keeps passing")
    probe = backend.probe(5)
    assert (probe.reason, probe.lost) == ("row remapping failed (nvmlDeviceGetRemappedRows)", False)
    event = next_event(watch)
    assert (event.gpu_index, event.kind, event.xid) == (5, HealthEventKind.XID, 48)
    assert [backend.probe(i).ok for i in range(8)] == [i != 5 for i in range(8)]


def test_a_gpu_fallen_off_the_bus_fails_its_probe_as_lost_and_recovers_when_cleared(
    own_host: Callable[[str], MockHost],
) -> None:
    host, backend, watch = watched(own_host, "gb200")
    host.inject({7: {"failure": {"mode": "fallen_off_bus"}}})
    eventually(lambda: backend.probe(7).lost, "GPU 7 is never lost")
    assert backend.probe(7).reason == "NVML nvmlDeviceGetHandleByUUID on GPU 7 failed: GPU is lost"
    assert watch.wait(0.05) is None  # no Xid configured: nothing to deliver, and the wait does not fail
    host.clear()
    eventually(lambda: backend.probe(7).ok, "GPU 7 stays lost after the fault is cleared")


def test_mock_limit_xid_events_on_a_gpu_without_mig_carry_instance_ids_0(own_host: Callable[[str], MockHost]) -> None:
    """A driver gives 0xFFFFFFFF as the GPU and compute instance of an event that is not MIG-scoped; the mock
    gives 0, so the backend (rightly, by NVML's rule) names MIG instance 0 in the reason."""
    host, backend, watch = watched(own_host, "h100")
    host.inject({0: {"failure": {"mode": "ecc_uncorrectable", "xid": {"code": 48}}}})
    eventually(lambda: not backend.probe(0).ok, "GPU 0's probe keeps passing")  # a fault trips on a call to its GPU
    assert next_event(watch) == HealthEvent(0, HealthEventKind.XID, xid=48, detail=MOCK_INSTANCE_IDS)
