"""HealthWatcher over a FakeNvml and real ResourceManagers: fan-out, recovery and fail-closed paths.

Waits use ResourceManager.wait_for_change, as ListAndWatch does, with generous bounds; nothing here
measures time (benchmarks/bench_health.py does).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence

import pytest

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.health import HealthConfig
from device_plugin.core.devices import DeviceListSnapshot, Health
from device_plugin.core.errors import NvmlError
from device_plugin.health.state import HealthCause, HealthTransition
from device_plugin.health.watcher import HealthWatcher, TransitionListener
from device_plugin.nvml.fake import FakeNvml
from device_plugin.nvml.health_types import EventWatch, HealthEvent, HealthEventKind, ProbeResult
from tests.probes_held import probes_held

from .conftest import (
    FAST,
    WAIT_S,
    ManualClock,
    eventually,
    gpus_are,
    mig_like,
    replicas,
    unhealthy_gpus,
    wait_until,
    whole_gpus,
)


def start(
    source: object,
    resources: Sequence[ResourceManager],
    config: HealthConfig = FAST,
    indices: range = range(8),
) -> HealthWatcher:
    watcher = HealthWatcher(source, indices, config, listeners=listeners(resources))  # type: ignore[arg-type]
    watcher.start()
    return watcher


def listeners(resources: Sequence[ResourceManager]) -> list[TransitionListener]:
    return [resource.on_health_transition for resource in resources]


class Flaky:
    """A HealthSource whose calls raise unexpected exceptions while `broken` is set."""

    def __init__(self, fake: FakeNvml) -> None:
        self.fake = fake
        self.broken = threading.Event()

    def open_event_watch(self, indices: tuple[int, ...]) -> EventWatch:
        if self.broken.is_set():
            raise RuntimeError("driver exploded")
        return self.fake.open_event_watch(indices)

    def probe(self, index: int) -> ProbeResult:
        if self.broken.is_set():
            raise ZeroDivisionError("bug in a backend")
        return self.fake.probe(index)


class Counting(Flaky):
    """Counts probe calls, so a test can wait for whole probe rounds to pass."""

    def __init__(self, fake: FakeNvml) -> None:
        super().__init__(fake)
        self.probes = 0

    def probe(self, index: int) -> ProbeResult:
        self.probes += 1
        return self.fake.probe(index)


@pytest.fixture
def managers(fake: FakeNvml) -> list[ResourceManager]:
    return [whole_gpus(fake), replicas(fake, 4), mig_like(fake, 3, 3)]


@pytest.fixture
def watcher(fake: FakeNvml, managers: list[ResourceManager]) -> Iterator[HealthWatcher]:
    started = start(fake, managers)
    yield started
    started.stop()


def test_critical_xid_marks_every_device_of_the_gpu_in_every_resource(
    fake: FakeNvml, managers: list[ResourceManager], watcher: HealthWatcher
) -> None:
    with probes_held(fake):  # the Xid, not a probe that sees the lost GPU first, makes it Unhealthy
        fake.test_hooks.inject(HealthEvent(3, HealthEventKind.XID, xid=79))
        eventually(lambda: watcher.states()[3].health is Health.UNHEALTHY)
    for resource in managers:
        snapshot = wait_until(resource, gpus_are({3}))
        bad = [d for d in snapshot.devices if not d.healthy]
        assert bad == [d for d in snapshot.devices if d.gpu_indices == (3,)]
        assert {d.health_reason for d in bad} == {"Xid 79"}
    assert [len([d for d in m.snapshot().devices if not d.healthy]) for m in managers] == [1, 4, 3]


def test_a_list_and_watch_waiter_sees_the_change(
    fake: FakeNvml, managers: list[ResourceManager], watcher: HealthWatcher
) -> None:
    shared = managers[1]
    before = shared.snapshot()
    seen: list[DeviceListSnapshot] = []
    waiter = threading.Thread(target=lambda: seen.append(shared.wait_for_change(before.version, WAIT_S)))
    waiter.start()
    fake.test_hooks.inject(HealthEvent(3, HealthEventKind.DOUBLE_BIT_ECC))
    waiter.join(WAIT_S)
    assert len(seen) == 1 and seen[0].version > before.version
    assert len(seen[0].devices) == len(before.devices)  # still the full list
    assert unhealthy_gpus(seen[0]) == {3}


def test_an_ignored_xid_leaves_the_gpu_healthy(
    fake: FakeNvml, managers: list[ResourceManager], watcher: HealthWatcher
) -> None:
    fake.test_hooks.inject(HealthEvent(3, HealthEventKind.XID, xid=13))
    fake.test_hooks.inject(HealthEvent(4, HealthEventKind.XID, xid=48))  # processed after the first: a barrier
    assert unhealthy_gpus(wait_until(managers[0], lambda s: 4 in unhealthy_gpus(s))) == {4}


def test_recovery_after_the_quiet_period(
    fake: FakeNvml, managers: list[ResourceManager], watcher: HealthWatcher
) -> None:
    fake.test_hooks.set_lost(3)
    wait_until(managers[1], gpus_are({3}))
    fake.test_hooks.recover(3, detail="reset")
    for resource in managers:
        snapshot = wait_until(resource, gpus_are(set()))
        gpu3 = [d for d in snapshot.devices if d.gpu_indices == (3,)]
        assert all(d.health_reason.startswith("recovered: probes passed") for d in gpu3)


def test_a_lost_gpu_stays_unhealthy_while_probes_fail(fake: FakeNvml, managers: list[ResourceManager]) -> None:
    clock = ManualClock()
    source = Counting(fake)
    watcher = HealthWatcher(source, range(8), FAST, clock=clock, listeners=listeners(managers))
    watcher.start()
    try:
        fake.test_hooks.set_lost(3)
        wait_until(managers[0], gpus_are({3}))
        clock.advance(100 * FAST.quiet_period_s)
        seen = source.probes
        eventually(lambda: source.probes >= seen + 2 * 8)
        assert unhealthy_gpus(managers[0].snapshot()) == {3}
        # whichever saw it first names the loss: the event ("GPU lost ...") or a probe ("... GPU is lost")
        assert re.search(r"GPU (is )?lost", watcher.states()[3].reason), watcher.states()[3].reason
    finally:
        watcher.stop()


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


def test_a_replay_brings_new_resource_managers_to_the_current_health(
    fake: FakeNvml, managers: list[ResourceManager], watcher: HealthWatcher
) -> None:
    fake.test_hooks.set_lost(3)
    wait_until(managers[0], gpus_are({3}))
    rebuilt = [whole_gpus(fake), replicas(fake, 2)]
    for resource in rebuilt:
        watcher.replay(resource.on_health_transition)
    assert [unhealthy_gpus(m.snapshot()) for m in rebuilt] == [{3}, {3}]
    assert {d.health_reason for d in rebuilt[1].snapshot().devices if not d.healthy} == {watcher.states()[3].reason}


def test_a_gpu_handed_over_later_is_watched_and_a_dropped_one_forgotten(
    fake: FakeNvml, managers: list[ResourceManager]
) -> None:
    watcher = start(fake, managers, indices=range(7))
    try:
        fake.test_hooks.inject(HealthEvent(7, HealthEventKind.XID, xid=79))  # not watched yet: waits in the backlog
        fake.test_hooks.inject(HealthEvent(6, HealthEventKind.XID, xid=79))  # handled after it would be: a barrier
        wait_until(managers[0], gpus_are({6}))
        watcher.set_gpus(range(1, 8))  # a rescan: GPU 7 found, GPU 0 gone
        assert watcher.gpu_indices == tuple(range(1, 8))
        assert set(watcher.states()) == set(range(1, 8)) and watcher.states()[6].health is Health.UNHEALTHY
        fake.test_hooks.inject(HealthEvent(7, HealthEventKind.DOUBLE_BIT_ECC))
        wait_until(managers[0], gpus_are({6, 7}))
    finally:
        watcher.stop()


def test_a_watcher_started_without_gpus_watches_those_a_rescan_finds(
    fake: FakeNvml, managers: list[ResourceManager]
) -> None:
    watcher = start(fake, managers, indices=range(0))
    try:
        watcher.set_gpus([2])
        fake.test_hooks.inject(HealthEvent(2, HealthEventKind.XID, xid=94))
        wait_until(managers[0], gpus_are({2}))
    finally:
        watcher.stop()


def test_listeners_get_each_transition_and_a_broken_one_is_contained(
    fake: FakeNvml, managers: list[ResourceManager], watcher: HealthWatcher
) -> None:
    seen: list[HealthTransition] = []

    def broken(transition: HealthTransition) -> None:
        raise RuntimeError("listener bug")

    watcher.add_listener(broken)
    watcher.add_listener(seen.append)
    fake.test_hooks.inject(HealthEvent(1, HealthEventKind.XID, xid=31, detail="ignored"))
    fake.test_hooks.inject(HealthEvent(1, HealthEventKind.XID, xid=94))
    wait_until(managers[0], gpus_are({1}))
    assert watcher.wait_delivered(5.0)  # the delivery the managers saw has reached every listener
    assert [(t.gpu_index, t.before, t.after, t.xid) for t in seen] == [(1, Health.HEALTHY, Health.UNHEALTHY, 94)]


def test_disabled_checks_consume_nothing(fake: FakeNvml, managers: list[ResourceManager]) -> None:
    watcher = start(fake, managers, HealthConfig(enabled=False))
    fake.test_hooks.inject(HealthEvent(3, HealthEventKind.XID, xid=79))
    watcher.stop()
    assert unhealthy_gpus(managers[0].snapshot()) == set()
    # Nobody opened a watch: the event is still waiting for one.
    assert fake.open_event_watch((3,)).wait(0.01) == HealthEvent(3, HealthEventKind.XID, xid=79)


def test_stop_closes_the_watch(fake: FakeNvml, managers: list[ResourceManager], watcher: HealthWatcher) -> None:
    fake.test_hooks.inject(HealthEvent(0, HealthEventKind.XID, xid=94))
    wait_until(managers[0], gpus_are({0}))
    watcher.stop()
    fake.test_hooks.inject(HealthEvent(1, HealthEventKind.XID, xid=94))
    assert fake.open_event_watch((1,)).wait(0.01) is not None  # backlogged: no watch was left open
    assert unhealthy_gpus(managers[0].snapshot()) == {0}


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


def test_recovery_follows_the_injected_clock(fake: FakeNvml, managers: list[ResourceManager]) -> None:
    clock = ManualClock()
    source = Counting(fake)
    config = HealthConfig(quiet_period_s=30.0, probe_interval_s=0.01, event_wait_s=0.05, retry_initial_s=0.02)
    watcher = HealthWatcher(source, range(8), config, clock=clock, listeners=listeners(managers))
    watcher.start()
    try:
        fake.test_hooks.set_lost(3)
        wait_until(managers[0], gpus_are({3}))
        fake.test_hooks.recover(3)
        seen = source.probes
        eventually(lambda: source.probes >= seen + 3 * 8)  # three full rounds pass at the same clock reading
        assert unhealthy_gpus(managers[0].snapshot()) == {3}
        clock.advance(29.0)
        seen = source.probes
        eventually(lambda: source.probes >= seen + 2 * 8)
        assert unhealthy_gpus(managers[0].snapshot()) == {3}
        clock.advance(1.0)
        wait_until(managers[0], gpus_are(set()))
    finally:
        watcher.stop()


def test_a_blocked_listener_holds_no_lock_and_later_transitions_wait_in_order(
    fake: FakeNvml, managers: list[ResourceManager], watcher: HealthWatcher
) -> None:
    """A listener that takes long (a front-end republishing) must not stall probes, states() or a rescan."""
    release = threading.Event()
    entered = threading.Event()
    seen: list[tuple[int, Health]] = []

    def slow(transition: HealthTransition) -> None:
        entered.set()
        release.wait(WAIT_S)
        seen.append((transition.gpu_index, transition.after))

    watcher.add_listener(slow)
    try:
        fake.test_hooks.inject(HealthEvent(1, HealthEventKind.XID, xid=94))
        assert entered.wait(WAIT_S)
        # Old code delivered under the watcher's lock: each of these would wait for `release`.
        done = threading.Event()
        threading.Thread(target=lambda: (watcher.states(), watcher.set_gpus(range(8)), done.set()), daemon=True).start()
        assert done.wait(WAIT_S)
        fake.test_hooks.inject(HealthEvent(2, HealthEventKind.XID, xid=79))
        fake.test_hooks.set_lost(1)
        eventually(lambda: watcher.states()[2].health is Health.UNHEALTHY)
        assert seen == []  # decided, but queued behind the blocked delivery
    finally:
        release.set()
    assert watcher.wait_delivered(WAIT_S)
    assert seen[:2] == [(1, Health.UNHEALTHY), (2, Health.UNHEALTHY)]


def test_after_stop_a_replay_is_delivered_on_the_callers_thread(
    fake: FakeNvml, managers: list[ResourceManager]
) -> None:
    watcher = start(fake, managers)
    fake.test_hooks.set_lost(3)
    wait_until(managers[0], gpus_are({3}))
    watcher.stop()
    late = whole_gpus(fake)
    watcher.replay(late.on_health_transition)
    assert unhealthy_gpus(late.snapshot()) == {3}


def test_a_replay_tells_the_cause_and_xid_that_made_the_gpu_unhealthy(
    fake: FakeNvml, managers: list[ResourceManager], watcher: HealthWatcher
) -> None:
    with probes_held(fake):  # the Xid, not a probe that sees the lost GPU first, makes it Unhealthy
        fake.test_hooks.inject(HealthEvent(3, HealthEventKind.XID, xid=79))
        eventually(lambda: watcher.states()[3].health is Health.UNHEALTHY)
    wait_until(managers[0], gpus_are({3}))
    told: list[HealthTransition] = []
    watcher.replay(told.append)
    assert [(t.gpu_index, t.cause, t.xid) for t in told] == [(3, HealthCause.XID, 79)]
