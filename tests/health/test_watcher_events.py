"""HealthWatcher over a FakeNvml and real ResourceManagers: the events it acts on and the GPUs it watches.

A critical Xid marks every device of its GPU in every resource and wakes a ListAndWatch waiter; an ignored
Xid does not. The GPU set follows a rescan; disabled checks open no watch, and stop closes the one open.
Waits use ResourceManager.wait_for_change, as ListAndWatch does, with generous bounds; nothing here
measures time (benchmarks/bench_health.py does).
"""

from __future__ import annotations

import threading

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.health import HealthConfig
from device_plugin.core.devices import DeviceListSnapshot, Health
from device_plugin.health.watcher import HealthWatcher
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from tests.probes_held import probes_held

from .conftest import WAIT_S, eventually, gpus_are, start, unhealthy_gpus, wait_until


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
