"""HealthWatcher over a FakeNvml and real ResourceManagers: recovery by probes after the quiet period.

A GPU that recovers is Healthy again once its probes have passed for the quiet period, measured on the
injected clock; a lost GPU stays Unhealthy while its probes fail, however long that lasts. Waits use
ResourceManager.wait_for_change with generous bounds; nothing here measures time (benchmarks/bench_health.py does).
"""

from __future__ import annotations

import re

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.health import HealthConfig
from device_plugin.health.watcher import HealthWatcher
from device_plugin.nvml.fake.machine import FakeNvml

from .conftest import FAST, Counting, ManualClock, eventually, gpus_are, listeners, unhealthy_gpus, wait_until


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
