"""RealNvml's health side (real_health.py) over a pynvml-shaped stand-in: registration, events, probes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.core.errors import NvmlError
from device_plugin.health.watcher import HealthWatcher
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind, HealthSource, ProbeResult
from device_plugin.nvml.real.backend import RealNvml

from .conftest import FAST, eventually, gpus_are, wait_until, whole_gpus
from .real_standin import (
    DOUBLE_BIT_ECC,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_UNKNOWN,
    SINGLE_BIT_ECC,
    XID_CRITICAL,
    HealthStandin,
)


@pytest.fixture
def standin(fake: FakeNvml) -> HealthStandin:
    return HealthStandin(fake)


@pytest.fixture
def real(standin: HealthStandin, tmp_path: Path) -> Iterator[RealNvml]:
    standin.write_sysfs(tmp_path)
    backend = RealNvml(tmp_path, library=standin)
    yield backend
    backend.close()


def test_the_real_backend_is_a_health_source(real: RealNvml) -> None:
    assert isinstance(real, HealthSource)


def test_registers_xid_and_double_bit_ecc_only(real: RealNvml, standin: HealthStandin) -> None:
    standin.faults[2].supported_events = SINGLE_BIT_ECC | XID_CRITICAL  # no ECC on this board
    standin.faults[5].supported_events = SINGLE_BIT_ECC
    real.open_event_watch(tuple(range(8)))
    registered = standin.sets[0].registered
    assert registered[0] == XID_CRITICAL | DOUBLE_BIT_ECC
    assert registered[2] == XID_CRITICAL
    assert 5 not in registered  # nothing it supports is watched; probes still cover it


def test_a_registration_failure_is_reported_per_gpu(real: RealNvml, standin: HealthStandin) -> None:
    standin.faults[4].register_error = NVML_ERROR_UNKNOWN
    watch = real.open_event_watch((3, 4))
    assert list(watch.registration_failures) == [4]
    assert "nvmlDeviceRegisterEvents on GPU 4" in watch.registration_failures[4]


def test_event_set_creation_failure_raises(real: RealNvml, standin: HealthStandin) -> None:
    standin.create_error = NVML_ERROR_UNKNOWN
    with pytest.raises(NvmlError, match="nvmlEventSetCreate"):
        real.open_event_watch((0,))


EVENTS = [
    ("xid", (3, XID_CRITICAL, 79), HealthEvent(3, HealthEventKind.XID, xid=79)),
    ("double-bit", (3, DOUBLE_BIT_ECC, 0), HealthEvent(3, HealthEventKind.DOUBLE_BIT_ECC)),
    (
        "mig-scoped-xid",
        (3, XID_CRITICAL, 94, 1, 0),
        HealthEvent(3, HealthEventKind.XID, xid=94, detail="MIG GPU instance 1, compute instance 0"),
    ),
]


@pytest.mark.parametrize(("emitted", "event"), [e[1:] for e in EVENTS], ids=[e[0] for e in EVENTS])
def test_events_become_health_events(
    real: RealNvml, standin: HealthStandin, emitted: tuple[int, ...], event: HealthEvent
) -> None:
    watch = real.open_event_watch((3,))
    standin.emit(*emitted)
    assert watch.wait(5.0) == event


def test_timeout_is_none_and_single_bit_is_never_seen(real: RealNvml, standin: HealthStandin) -> None:
    watch = real.open_event_watch((3,))
    standin.emit(3, SINGLE_BIT_ECC)
    assert watch.wait(0.01) is None


def test_a_wait_error_raises_and_close_frees_the_set(real: RealNvml, standin: HealthStandin) -> None:
    watch = real.open_event_watch((3,))
    standin.wait_error = NVML_ERROR_GPU_IS_LOST
    with pytest.raises(NvmlError, match="nvmlEventSetWait_v2") as caught:
        watch.wait(0.01)
    assert caught.value.code == NVML_ERROR_GPU_IS_LOST
    watch.close()
    watch.close()
    assert standin.sets[0].freed


PROBES = [
    ("all-good", {}, None),
    ("lost", {"lost": True}, "nvmlDeviceGetHandleByUUID on GPU 1 failed"),
    ("retired-pages-pending", {"retired_pages_pending": 1}, "retired pages pending"),
    ("rows-pending", {"remapped_rows": (0, 1, 1, 0)}, "row remapping pending"),
    ("rows-failed", {"remapped_rows": (0, 9, 0, 1)}, "row remapping failed"),
    ("recovery-action", {"recovery_action": 1}, "recovery action GPU_RESET"),
    ("nothing-supported", {"retired_pages_pending": None, "remapped_rows": None, "recovery_action": None}, None),
]


@pytest.mark.parametrize(("faults", "reason"), [p[1:] for p in PROBES], ids=[p[0] for p in PROBES])
def test_probe(real: RealNvml, standin: HealthStandin, faults: dict[str, object], reason: str | None) -> None:
    for name, value in faults.items():
        setattr(standin.faults[1], name, value)
    result = real.probe(1)
    if reason is None:
        assert result == ProbeResult(1, True)
    else:
        assert not result.ok and reason in result.reason
        assert result.lost == ("lost" in faults)  # only NVML's GPU_IS_LOST makes a probe report the GPU lost
    assert real.probe(0).ok


def test_probe_after_shutdown_fails(real: RealNvml) -> None:
    real.close()
    assert not real.probe(0).ok


def test_watcher_over_the_real_backend(real: RealNvml, standin: HealthStandin, fake: FakeNvml) -> None:
    resource = whole_gpus(fake)
    watcher = HealthWatcher(real, range(8), FAST, listeners=[resource.on_health_transition])
    watcher.start()
    try:
        # The driver delivers events only to sets that registered them: emit once the watch is open.
        eventually(lambda: bool(standin.sets) and 6 in standin.sets[-1].registered)
        standin.emit(6, XID_CRITICAL, 48)
        wait_until(resource, gpus_are({6}))
        standin.faults[7].lost = True
        wait_until(resource, gpus_are({6, 7}))
        standin.faults[7].lost = False
        wait_until(resource, gpus_are(set()))
    finally:
        watcher.stop()
