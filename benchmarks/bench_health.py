"""Fault-to-kubelet latency: from a fault injected into the fake NVML to the kubelet stand-in holding the
new ListAndWatch list that shows it, p50 / p99 over N faults (issue: within 1 s; design target 100 ms).

Setup: dgx1-v100 (8 GPUs) served as nvidia.com/gpu and as nvidia.com/gpu.shared (4 replicas each), the
real PluginManager and gRPC over unix sockets, the HealthWatcher with a 0 s quiet period and 10 ms probes.
Each round injects Xid 79 on GPU i mod 8, waits until both resources' latest lists show every device of
that GPU Unhealthy, then recovers it and waits until both are Healthy again (the recovery figure is bounded
by the probe interval plus the quiet period, by design).

Run: .venv/bin/python benchmarks/bench_health.py [--faults N]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from _common import target_line

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.health import HealthConfig
from device_plugin.core.devices import Device
from device_plugin.core.ids import format_replica_id
from device_plugin.dp_helper.lifecycle import PluginManager
from device_plugin.health.watcher import HealthWatcher
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from testbed.allocation_doubles import EnvVarResponseBuilder, LowestIndexPolicy

TARGET_P99_MS = 100.0
CONFIG = HealthConfig(quiet_period_s=0.0, probe_interval_s=0.01, event_wait_s=0.5)


def resources(fake: FakeNvml) -> list[ResourceManager]:
    gpus = fake.gpus()
    whole = [Device(g.uuid, (g.index,), g.numa_node) for g in gpus]
    shared = [Device(format_replica_id(g.uuid, n), (g.index,), g.numa_node) for g in gpus for n in range(4)]
    return [
        ResourceManager("nvidia.com/gpu", whole, LowestIndexPolicy(), EnvVarResponseBuilder()),
        ResourceManager("nvidia.com/gpu.shared", shared, LowestIndexPolicy(), EnvVarResponseBuilder()),
    ]


def percentiles(samples_s: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples_s)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return f"p50 {statistics.median(ms):7.2f} ms   p99 {p99:7.2f} ms   max {ms[-1]:7.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=100)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # every transition logs; keep the figures readable
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-b-", dir="/tmp"))
    fake = FakeNvml.from_machine("dgx1-v100")
    managers = resources(fake)
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    plugins = [PluginManager(m, plugin_dir) for m in managers]  # one per resource, as the daemon serves them
    for plugin in plugins:
        plugin.start()
    for m in managers:
        kubelet.wait_for_connection(m.resource_name, timeout_s=20.0)
    watcher = HealthWatcher(fake, range(8), CONFIG, listeners=[m.on_health_transition for m in managers])
    watcher.start()
    ids = {
        m.resource_name: {i: {d.id for d in m.snapshot().devices if d.gpu_indices == (i,)} for i in range(8)}
        for m in managers
    }

    def shows(index: int, health: str) -> bool:
        return all(
            {d.id for d in kubelet.current(name).lists[-1] if d.health == health} >= ids[name][index] for name in ids
        )

    failing: list[float] = []
    recovering: list[float] = []
    try:
        for round_ in range(args.faults):
            index = round_ % 8
            started = time.perf_counter()
            fake.test_hooks.inject(HealthEvent(index, HealthEventKind.XID, xid=79))
            kubelet.wait_for(partial(shows, index, "Unhealthy"), 10.0)
            failing.append(time.perf_counter() - started)
            started = time.perf_counter()
            fake.test_hooks.recover(index)
            kubelet.wait_for(partial(shows, index, "Healthy"), 10.0)
            recovering.append(time.perf_counter() - started)
    finally:
        watcher.stop()
        for plugin in plugins:
            plugin.stop()
        kubelet.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)
    print(f"fault -> kubelet list Unhealthy ({len(failing)} faults, 2 resources): {percentiles(failing)}")
    print(f"recover -> kubelet list Healthy  (quiet 0 s, probes 10 ms):       {percentiles(recovering)}")
    p99_ms = sorted(failing)[round(0.99 * (len(failing) - 1))] * 1000
    print(target_line(f"fault -> Unhealthy p99 <= {TARGET_P99_MS:.0f} ms", p99_ms <= TARGET_P99_MS))


if __name__ == "__main__":
    main()
