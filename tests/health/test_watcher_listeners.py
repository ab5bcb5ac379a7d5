"""HealthWatcher over a FakeNvml and real ResourceManagers: delivering transitions to listeners, and replays.

Every listener gets each transition in order, a broken one is contained, and a blocked one holds no lock
(probes, states() and a rescan go on). A replay brings a new listener to the current health, with the cause
and Xid, also after stop. Waits use ResourceManager.wait_for_change with generous bounds; nothing here
measures time.
"""

from __future__ import annotations

import threading

from device_plugin.allocation.resources import ResourceManager
from device_plugin.core.devices import Health
from device_plugin.health.state import HealthCause, HealthTransition
from device_plugin.health.watcher import HealthWatcher
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from tests.probes_held import probes_held

from .conftest import WAIT_S, eventually, gpus_are, replicas, start, unhealthy_gpus, wait_until, whole_gpus


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


def test_listeners_get_each_transition_and_a_broken_one_is_contained(
    fake: FakeNvml, managers: list[ResourceManager]
) -> None:
    seen: list[HealthTransition] = []

    def broken(transition: HealthTransition) -> None:
        raise RuntimeError("listener bug")

    watcher = start(fake, managers, more=[broken, seen.append])
    try:
        fake.test_hooks.inject(HealthEvent(1, HealthEventKind.XID, xid=31, detail="ignored"))
        fake.test_hooks.inject(HealthEvent(1, HealthEventKind.XID, xid=94))
        wait_until(managers[0], gpus_are({1}))
        assert watcher.wait_delivered(5.0)  # the delivery the managers saw has reached every listener
        assert [(t.gpu_index, t.before, t.after, t.xid) for t in seen] == [(1, Health.HEALTHY, Health.UNHEALTHY, 94)]
    finally:
        watcher.stop()


def test_a_blocked_listener_holds_no_lock_and_later_transitions_wait_in_order(
    fake: FakeNvml, managers: list[ResourceManager]
) -> None:
    """A listener that takes long (a front-end republishing) must not stall probes, states() or a rescan."""
    release = threading.Event()
    entered = threading.Event()
    seen: list[tuple[int, Health]] = []

    def slow(transition: HealthTransition) -> None:
        entered.set()
        release.wait(WAIT_S)
        seen.append((transition.gpu_index, transition.after))

    watcher = start(fake, managers, more=[slow])
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
    try:
        assert watcher.wait_delivered(WAIT_S)
        assert seen[:2] == [(1, Health.UNHEALTHY), (2, Health.UNHEALTHY)]
    finally:
        watcher.stop()


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
