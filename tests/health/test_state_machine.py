"""HealthStateMachine: the two-way transition table, driven by a manual clock (no threads)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from device_plugin.config.health import HealthConfig, parse_health_config
from device_plugin.core.devices import Health
from device_plugin.health.state import HealthCause, HealthStateMachine, HealthTransition
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind, ProbeResult

H, U = Health.HEALTHY, Health.UNHEALTHY
QUIET_S = 10.0
CONFIG = HealthConfig(quiet_period_s=QUIET_S)


def xid(code: int) -> HealthEvent:
    return HealthEvent(3, HealthEventKind.XID, xid=code)


DBE = HealthEvent(3, HealthEventKind.DOUBLE_BIT_ECC)
LOST = HealthEvent(3, HealthEventKind.LOST)
HINT = HealthEvent(3, HealthEventKind.RECOVERED)
OK = ProbeResult(3, True)
BAD = ProbeResult(3, False, "nvmlDeviceGetMemoryInfo failed: GPU is lost")


@dataclass(frozen=True)
class Step:
    at_s: float
    action: object  # HealthEvent, ProbeResult, or ("watch_failed" | "watch_restored", reason)


def run(config: HealthConfig, steps: list[Step]) -> list[tuple[float, Health, str]]:
    machine = HealthStateMachine([3, 4], config)
    seen = []
    for step in steps:
        action = step.action
        if isinstance(action, HealthEvent):
            transitions = [machine.on_event(action, step.at_s)]
        elif isinstance(action, ProbeResult):
            transitions = [machine.on_probe(action, step.at_s)]
        elif action[0] == "watch_failed":  # type: ignore[index]
            transitions = list(machine.on_watch_failed([3], action[1], step.at_s))  # type: ignore[index]
        else:
            machine.on_watch_restored([3])
            transitions = []
        seen += [(t.at_s, t.after, t.reason) for t in transitions if t is not None]
    assert machine.state(4).health is H, "GPU 4 is never touched"
    return seen


def only_health(seen: list[tuple[float, Health, str]]) -> list[tuple[float, Health]]:
    return [(at, health) for at, health, _ in seen]


CASES: list[tuple[str, HealthConfig, list[Step], list[tuple[float, Health]]]] = [
    ("critical-xid-unhealthy", CONFIG, [Step(0, xid(79))], [(0, U)]),
    ("ignored-xid-stays-healthy", CONFIG, [Step(0, xid(13)), Step(1, xid(109))], []),
    ("double-bit-ecc-unhealthy", CONFIG, [Step(0, DBE)], [(0, U)]),
    ("lost-unhealthy", CONFIG, [Step(0, LOST)], [(0, U)]),
    ("failed-probe-unhealthy", CONFIG, [Step(0, BAD)], [(0, U)]),
    ("recovery-hint-alone-changes-nothing", CONFIG, [Step(0, HINT)], []),
    (
        "recovers-after-quiet-period",
        CONFIG,
        [Step(0, xid(79)), Step(1, OK), Step(6, OK), Step(10.9, OK), Step(11, OK)],
        [(0, U), (11, H)],
    ),
    (
        "new-event-during-quiet-period-restarts-it",
        CONFIG,
        [Step(0, xid(79)), Step(1, OK), Step(8, xid(48)), Step(9, OK), Step(11, OK), Step(18.9, OK), Step(19, OK)],
        [(0, U), (19, H)],
    ),
    (
        "failed-probe-during-quiet-period-restarts-it",
        CONFIG,
        [Step(0, LOST), Step(1, OK), Step(5, BAD), Step(6, OK), Step(15.9, OK), Step(16, OK)],
        [(0, U), (16, H)],
    ),
    (
        "ignored-xid-does-not-restart-quiet-period",
        CONFIG,
        [Step(0, xid(79)), Step(1, OK), Step(5, xid(43)), Step(11, OK)],
        [(0, U), (11, H)],
    ),
    (
        "no-probe-no-recovery",
        CONFIG,
        [Step(0, xid(79)), Step(100, OK)],  # the quiet period starts with the first passing probe
        [(0, U)],
    ),
    (
        "fails-again-after-recovery",
        CONFIG,
        [Step(0, xid(79)), Step(1, OK), Step(11, OK), Step(12, DBE)],
        [(0, U), (11, H), (12, U)],
    ),
    (
        "watch-failure-fails-closed",
        CONFIG,
        [Step(0, ("watch_failed", "event set cannot be created: NVML Unknown Error"))],
        [(0, U)],
    ),
    (
        "no-recovery-while-unwatched",
        CONFIG,
        [Step(0, ("watch_failed", "wait failed")), Step(1, OK), Step(50, OK)],
        [(0, U)],
    ),
    (
        "recovers-once-watch-restored-and-quiet",
        CONFIG,
        [
            Step(0, ("watch_failed", "wait failed")),
            Step(1, OK),
            Step(2, ("watch_restored", "")),
            Step(3, OK),
            Step(13, OK),
        ],
        [(0, U), (13, H)],
    ),
    (
        "zero-quiet-period-recovers-on-first-passing-probe",
        HealthConfig(quiet_period_s=0),
        [Step(0, xid(79)), Step(1, OK)],
        [(0, U), (1, H)],
    ),
    (
        "disable-all-disables-everything",
        parse_health_config(None, {"DP_DISABLE_HEALTHCHECKS": "all"}),
        [Step(0, xid(79)), Step(1, DBE), Step(2, BAD), Step(3, ("watch_failed", "no NVML"))],
        [],
    ),
    (
        "disable-xids-keeps-ecc-and-probes",
        parse_health_config(None, {"DP_DISABLE_HEALTHCHECKS": "xids"}),
        [Step(0, xid(79)), Step(1, DBE)],
        [(1, U)],
    ),
    (
        "enable-list-overrides-default-ignore",
        parse_health_config(None, {"DP_ENABLE_HEALTHCHECKS": "13"}),
        [Step(0, xid(13))],
        [(0, U)],
    ),
    (
        "disable-list-adds-to-ignore",
        parse_health_config(None, {"DP_DISABLE_HEALTHCHECKS": "79, 48"}),
        [Step(0, xid(79)), Step(1, xid(48)), Step(2, xid(94))],
        [(2, U)],
    ),
]


@pytest.mark.parametrize(("config", "steps", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_transition_table(config: HealthConfig, steps: list[Step], expected: list[tuple[float, Health]]) -> None:
    assert only_health(run(config, steps)) == expected


REASONS: list[tuple[str, Callable[[HealthStateMachine], HealthTransition | None], str]] = [
    ("xid-names-code", lambda m: m.on_event(HealthEvent(3, HealthEventKind.XID, xid=79, detail="d"), 0), "Xid 79 (d)"),
    ("ecc", lambda m: m.on_event(DBE, 0), "double-bit ECC error"),
    ("probe", lambda m: m.on_probe(BAD, 0), "probe failed: nvmlDeviceGetMemoryInfo failed: GPU is lost"),
    ("watch", lambda m: m.on_watch_failed([3], "boom", 0)[0], "health watch failed: boom"),
]


@pytest.mark.parametrize(("act", "reason"), [r[1:] for r in REASONS], ids=[r[0] for r in REASONS])
def test_transition_reason_is_explicit(
    act: Callable[[HealthStateMachine], HealthTransition | None], reason: str
) -> None:
    machine = HealthStateMachine([3], CONFIG)
    transition = act(machine)
    assert transition is not None and transition.reason == reason
    assert machine.state(3).reason == reason


def test_xid_transition_carries_the_code() -> None:
    transition = HealthStateMachine([3], CONFIG).on_event(xid(94), 5.0)
    assert transition is not None and (transition.xid, transition.at_s) == (94, 5.0)


def test_an_event_for_an_unknown_gpu_is_ignored() -> None:
    machine = HealthStateMachine([3], CONFIG)
    assert machine.on_event(HealthEvent(9, HealthEventKind.LOST), 0) is None
    assert set(machine.states()) == {3}


def test_recovery_reason_says_how_long_it_was_quiet() -> None:
    seen = run(CONFIG, [Step(0, xid(79)), Step(1, OK), Step(11, OK)])
    assert seen[-1][2] == "recovered: probes passed for 10.0 s with no critical event"


CAUSES = {
    # id: (what happened, the transition's cause, its xid)
    "critical-xid": (xid(79), HealthCause.XID, 79),
    "double-bit-ecc": (DBE, HealthCause.DOUBLE_BIT_ECC, None),
    "lost-gpu-event": (LOST, HealthCause.LOST, None),
    "failed-probe": (BAD, HealthCause.PROBE_FAILED, None),
    "probe-finds-the-gpu-lost": (ProbeResult(3, False, "GPU is lost", lost=True), HealthCause.LOST, None),
    "watch-failed": (("watch_failed", "no event set"), HealthCause.WATCH_FAILED, None),
}


@pytest.mark.parametrize("case", CAUSES.values(), ids=CAUSES.keys())
def test_each_transition_says_its_cause_typed_and_the_state_keeps_it_until_recovery(
    case: tuple[object, HealthCause, int | None],
) -> None:
    action, cause, code = case
    machine = HealthStateMachine([3], CONFIG)
    if isinstance(action, HealthEvent):
        transition = machine.on_event(action, 1.0)
    elif isinstance(action, ProbeResult):
        transition = machine.on_probe(action, 1.0)
    else:
        (transition,) = machine.on_watch_failed([3], "no event set", 1.0)
        machine.on_watch_restored([3])
    assert transition is not None and (transition.cause, transition.xid) == (cause, code)
    assert (machine.state(3).cause, machine.state(3).xid) == (cause, code)  # what a replay tells again
    machine.on_probe(OK, 2.0)
    back = machine.on_probe(OK, 2.0 + QUIET_S)
    assert back is not None and back.cause is HealthCause.RECOVERED and back.xid is None
    assert (machine.state(3).cause, machine.state(3).xid) == (None, None)
