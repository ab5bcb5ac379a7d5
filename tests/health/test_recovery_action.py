"""The driver's recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) deciding health: the pure state machine,
both backends (the fake, and RealNvml over the pynvml-shaped stand-in), the faults file and the taint it
puts on a GPU's DRA devices. MIG parents in both modes: test_recovery_action_mig.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from device_plugin.config.health import HealthConfig
from device_plugin.core.devices import Health
from device_plugin.core.errors import NvmlError
from device_plugin.dra.taints import taint_for
from device_plugin.health.fake_events import parse_fault_line
from device_plugin.health.state import HealthCause, HealthStateMachine, HealthTransition
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind, ProbeResult
from device_plugin.nvml.real.backend import RealNvml
from device_plugin.nvml.recovery_action import RecoveryAction as A
from device_plugin.nvml.recovery_action import parse_recovery_action, supported_by_driver

from .real_standin import NVML_ERROR_GPU_IS_LOST, XID_CRITICAL, HealthStandin

NOW_S = 100.0


def xid(code: int, action: int | None) -> HealthEvent:
    return HealthEvent(3, HealthEventKind.XID, xid=code, recovery_action=action)


FORCED_94 = HealthConfig(critical_xids=frozenset({94}))
XIDS = {
    # id: (event, config, cause after, or None when the GPU stays Healthy)
    "none-is-informational": (xid(94, A.NONE), HealthConfig(), None),
    "imex-domain-recovery-is-informational": (xid(94, A.RECOVER_IMEX_DOMAIN), HealthConfig(), None),
    "gpu-reset-takes-it-out": (xid(94, A.GPU_RESET), HealthConfig(), HealthCause.XID),
    "node-reboot-takes-it-out": (xid(94, A.NODE_REBOOT), HealthConfig(), HealthCause.XID),
    "drain-p2p-takes-it-out": (xid(74, A.DRAIN_P2P), HealthConfig(), HealthCause.XID),
    "drain-and-reset-takes-it-out": (xid(74, A.DRAIN_AND_RESET), HealthConfig(), HealthCause.XID),
    "bus-reset-takes-it-out": (xid(79, A.BUS_RESET), HealthConfig(), HealthCause.XID),
    "system-reboot-takes-it-out": (xid(79, A.SYSTEM_REBOOT), HealthConfig(), HealthCause.XID),
    "an-action-newer-than-us-takes-it-out": (xid(94, 42), HealthConfig(), HealthCause.XID),
    "no-action-known-the-xid-policy-decides": (xid(94, None), HealthConfig(), HealthCause.XID),
    "forced-critical-xid-stays-a-fault-with-none": (xid(94, A.NONE), FORCED_94, HealthCause.XID),
    "an-ignored-xid-stays-ignored-even-with-a-reset": (xid(13, A.GPU_RESET), HealthConfig(), None),
}


@pytest.mark.parametrize("case", XIDS.values(), ids=XIDS.keys())
def test_an_xid_is_decided_by_the_recovery_action_it_came_with(
    case: tuple[HealthEvent, HealthConfig, HealthCause | None],
) -> None:
    event, config, cause = case
    machine = HealthStateMachine(range(8), config)
    transition = machine.on_event(event, NOW_S)
    if cause is None:
        assert transition is None and machine.state(3).health is Health.HEALTHY
        return
    assert transition is not None and (transition.cause, transition.xid) == (cause, event.xid)
    assert transition.recovery_action == event.recovery_action and machine.state(3).health is Health.UNHEALTHY


PROBES = {
    # id: (probe result, cause after or None)
    "a-reset-found-by-a-probe": (ProbeResult(3, False, "r", recovery_action=A.GPU_RESET), HealthCause.RECOVERY_ACTION),
    "lost-wins-over-the-action": (ProbeResult(3, False, "r", lost=True, recovery_action=1), HealthCause.LOST),
    "rows-pending-with-none-is-a-probe-failure": (
        ProbeResult(3, False, "r", recovery_action=0),
        HealthCause.PROBE_FAILED,
    ),
    "imex-domain-recovery-passes": (ProbeResult(3, True, recovery_action=A.RECOVER_IMEX_DOMAIN), None),
}


@pytest.mark.parametrize("case", PROBES.values(), ids=PROBES.keys())
def test_a_probe_names_the_action_that_took_the_gpu_out(case: tuple[ProbeResult, HealthCause | None]) -> None:
    result, cause = case
    machine = HealthStateMachine(range(8), HealthConfig())
    transition = machine.on_probe(result, NOW_S)
    assert (transition.cause if transition else None) == cause
    if transition is not None:
        assert transition.recovery_action == result.recovery_action
        assert machine.state(3).recovery_action == result.recovery_action  # a replay tells it again


def test_recovery_needs_the_action_cleared_and_the_quiet_period() -> None:
    machine = HealthStateMachine(range(8), HealthConfig(quiet_period_s=10.0))
    assert machine.on_probe(ProbeResult(3, False, "reset", recovery_action=A.GPU_RESET), NOW_S) is not None
    assert machine.on_probe(ProbeResult(3, True, recovery_action=A.NONE), NOW_S + 1) is None
    back = machine.on_probe(ProbeResult(3, True, recovery_action=A.NONE), NOW_S + 11)
    assert back is not None and back.healthy and back.recovery_action is None


# ---- the fake backend --------------------------------------------------------------------------


def machine_with_driver(tmp_path: Path, version: str, machine: str = "h100-mig-mixed") -> Path:
    """A shipped machine as a description file whose driver is `version`."""
    shipped = Path(__file__).parents[2] / "device_plugin" / "machines" / f"{machine}.yaml"
    text = shipped.read_text(encoding="utf-8")
    assert 'driver_version: "550.90.07"' in text
    path = tmp_path / f"{machine}-{version}.yaml"
    path.write_text(text.replace('driver_version: "550.90.07"', f'driver_version: "{version}"'), encoding="utf-8")
    return path


DRIVERS = {
    "525": ("525.147.05", False),
    "560": ("560.35.03", False),
    "565": ("565.57.01", True),
    "580": ("580.1", True),
}


@pytest.mark.parametrize(("version", "supported"), DRIVERS.values(), ids=DRIVERS.keys())
def test_drivers_from_565_report_an_action(version: str, supported: bool) -> None:
    assert supported_by_driver(version) is supported


def test_an_older_driver_reports_none_and_refuses_one_stated(fake: FakeNvml) -> None:
    assert fake.probe(3) == ProbeResult(3, True)  # dgx1-v100 has driver 535: no recovery action at all
    with pytest.raises(NvmlError, match="565") as caught:
        fake.test_hooks.set_recovery_action(3, A.GPU_RESET)
    assert caught.value.code == 3  # NOT_SUPPORTED, as NVML answers


def test_the_fake_reports_the_action_until_recovered(tmp_path: Path) -> None:
    fake = FakeNvml.from_machine(machine_with_driver(tmp_path, "570.124.06"))
    watch = fake.open_event_watch(tuple(range(8)))
    assert fake.probe(5) == ProbeResult(5, True, recovery_action=A.NONE)
    fake.test_hooks.inject(HealthEvent(5, HealthEventKind.XID, xid=94, recovery_action=A.DRAIN_AND_RESET))
    event = watch.wait(1.0)
    assert event is not None and event.recovery_action == A.DRAIN_AND_RESET
    probe = fake.probe(5)
    assert (probe.ok, probe.recovery_action) == (False, A.DRAIN_AND_RESET) and "DRAIN_AND_RESET" in probe.reason
    fake.test_hooks.inject(HealthEvent(5, HealthEventKind.XID, xid=31))  # a later Xid reads the pending action
    later = watch.wait(1.0)
    assert later is not None and later.recovery_action == A.DRAIN_AND_RESET
    fake.test_hooks.recover(5)
    assert fake.probe(5) == ProbeResult(5, True, recovery_action=A.NONE)
    fake.close()


# ---- the real backend over the stand-in --------------------------------------------------------


@pytest.fixture
def real(fake: FakeNvml, tmp_path: Path) -> tuple[RealNvml, HealthStandin]:
    standin = HealthStandin(fake)
    standin.write_sysfs(tmp_path)
    return RealNvml(tmp_path, library=standin), standin


REAL_PROBES = {
    "none-passes": (A.NONE, True),
    "imex-domain-recovery-passes": (A.RECOVER_IMEX_DOMAIN, True),
    "gpu-reset-fails": (A.GPU_RESET, False),
    "drain-p2p-fails": (A.DRAIN_P2P, False),
    "unknown-value-fails": (9, False),
}


@pytest.mark.parametrize(("action", "ok"), REAL_PROBES.values(), ids=REAL_PROBES.keys())
def test_the_real_probe_reads_the_action(real: tuple[RealNvml, HealthStandin], action: int, ok: bool) -> None:
    backend, standin = real
    standin.faults[1].recovery_action = action
    result = backend.probe(1)
    assert (result.ok, result.recovery_action) == (ok, action)
    if not ok:
        assert "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION" in result.reason
    backend.close()


def test_a_driver_without_the_field_is_no_information_logged_once(
    real: tuple[RealNvml, HealthStandin], caplog: pytest.LogCaptureFixture
) -> None:
    backend, _ = real  # the stand-in's default: NOT_SUPPORTED, as drivers before 565 answer
    with caplog.at_level(logging.INFO, logger="device_plugin.nvml.real.health"):
        results = [backend.probe(2) for _ in range(3)]
    assert results == [ProbeResult(2, True)] * 3
    assert caplog.text.count("GPU 2: the driver reports no recovery action") == 1
    backend.close()


ON_XID = {
    # id: (stand-in action, GPU lost when the Xid arrives, action the event carries)
    "reset-read-with-the-xid": (A.GPU_RESET, False, A.GPU_RESET),
    "none-read-with-the-xid": (A.NONE, False, A.NONE),
    "older-driver-says-nothing": (None, False, None),
    "a-lost-gpu-cannot-say": (A.GPU_RESET, True, None),
}


@pytest.mark.parametrize(("action", "lost", "carried"), ON_XID.values(), ids=ON_XID.keys())
def test_an_xid_event_carries_the_action_read_when_it_arrives(
    real: tuple[RealNvml, HealthStandin], action: int | None, lost: bool, carried: int | None
) -> None:
    backend, standin = real
    standin.faults[4].recovery_action = action
    watch = backend.open_event_watch((4,))
    if lost:
        standin.nvmlDeviceGetFieldValues = _lost  # type: ignore[method-assign]
    standin.emit(4, XID_CRITICAL, 94)
    assert watch.wait(5.0) == HealthEvent(4, HealthEventKind.XID, xid=94, recovery_action=carried)
    watch.close()
    backend.close()


def _lost(handle: int, field_ids: list[int]) -> list[object]:
    from tests.nvml.nvml_standin import NVMLError

    raise NVMLError(NVML_ERROR_GPU_IS_LOST)


# ---- the faults file ---------------------------------------------------------------------------

LINES = {
    "name": ('{"gpu": 2, "xid": 94, "recovery_action": "GPU_RESET"}', A.GPU_RESET),
    "nvml-h-name-any-case": ('{"gpu": 2, "xid": 94, "recovery_action": "gpu_recovery_action_drain_p2p"}', A.DRAIN_P2P),
    "number": ('{"gpu": 2, "xid": 94, "recovery_action": 5}', A.RECOVER_IMEX_DOMAIN),
    "left-out": ('{"gpu": 2, "xid": 94}', None),
}


@pytest.mark.parametrize(("line", "action"), LINES.values(), ids=LINES.keys())
def test_a_faults_line_states_the_action_with_an_xid(line: str, action: int | None) -> None:
    assert parse_fault_line(line) == HealthEvent(2, HealthEventKind.XID, xid=94, recovery_action=action)


BAD_LINES = {
    "unknown-name": ('{"gpu": 2, "xid": 94, "recovery_action": "PANIC"}', '"recovery_action" must be one of NONE'),
    "out-of-range": ('{"gpu": 2, "xid": 94, "recovery_action": 8}', "got 8"),
    "a-bool": ('{"gpu": 2, "xid": 94, "recovery_action": true}', "got True"),
    "without-an-xid": ('{"gpu": 2, "lost": true, "recovery_action": 1}', 'goes with "xid" only'),
}


@pytest.mark.parametrize(("line", "message"), BAD_LINES.values(), ids=BAD_LINES.keys())
def test_a_bad_action_is_refused_naming_the_field(line: str, message: str) -> None:
    with pytest.raises(ValueError, match="recovery_action") as caught:
        parse_fault_line(line)
    assert message in str(caught.value)


def test_names_round_trip() -> None:
    assert [parse_recovery_action(a.name, "f") for a in A] == list(A)


# ---- the taint ---------------------------------------------------------------------------------


def down(cause: HealthCause, action: int | None, code: int | None = None) -> HealthTransition:
    return HealthTransition(3, Health.HEALTHY, Health.UNHEALTHY, "why", 1.0, code, cause, action)


TAINTS = {
    "fatal-xid-keeps-nvidias-xid-key": (down(HealthCause.XID, A.GPU_RESET, 94), ("gpu.nvidia.com/xid", "94")),
    "probe-found-reset": (down(HealthCause.RECOVERY_ACTION, A.GPU_RESET), ("a.io/unhealthy", "recovery-gpu-reset")),
    "probe-found-drain": (
        down(HealthCause.RECOVERY_ACTION, A.DRAIN_AND_RESET),
        ("a.io/unhealthy", "recovery-drain-and-reset"),
    ),
    "probe-found-unknown": (down(HealthCause.RECOVERY_ACTION, 42), ("a.io/unhealthy", "recovery-unknown")),
}


@pytest.mark.parametrize(("transition", "key_value"), TAINTS.values(), ids=TAINTS.keys())
def test_an_action_that_takes_the_gpu_out_is_a_no_schedule_taint(
    transition: HealthTransition, key_value: tuple[str, str]
) -> None:
    taint = taint_for(transition, own_domain="a.io", now_unix_s=1_790_000_000.0)
    assert ((taint.key, taint.value), taint.effect) == (key_value, "NoSchedule")
