"""Health over the kubelet stand-in: FakeNvml faults -> HealthWatcher -> ResourceManagers -> ListAndWatch.

The plugin (PluginManager) and the kubelet stand-in talk over real unix sockets in a short temporary
directory. Waits are generous failure bounds; the latency figures come from benchmarks/bench_health.py.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.health import HealthConfig
from device_plugin.dp_helper.lifecycle import PluginManager
from device_plugin.health.fake_events import FakeEventsTail
from device_plugin.health.watcher import HealthWatcher
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn, ListedDevice
from testbed.timing import FAST_LIFECYCLE

from .conftest import FAST, WAIT_S, replicas, whole_gpus

TIMING = FAST_LIFECYCLE
GPU, SHARED = "nvidia.com/gpu", "nvidia.com/gpu.shared"


@dataclass
class Node:
    fake: FakeNvml
    resources: dict[str, ResourceManager]
    watcher: HealthWatcher
    managers: list[PluginManager]  # one per resource, as the daemon serves them
    kubelet: KubeletStandIn

    def unhealthy(self, resource: str) -> set[str]:
        return {d.id for d in self.kubelet.latest_devices(resource) if d.health != "Healthy"}

    def wait_list(self, resource: str, predicate: Callable[[tuple[ListedDevice, ...]], bool]) -> None:
        self.kubelet.wait_for(lambda: predicate(self.kubelet.current(resource).lists[-1]), WAIT_S)

    def wait_unhealthy(self, resource: str, ids: set[str]) -> None:
        self.wait_list(resource, lambda listed: {d.id for d in listed if d.health != "Healthy"} == ids)

    def ids_of_gpu(self, resource: str, index: int) -> set[str]:
        return {d.id for d in self.resources[resource].snapshot().devices if d.gpu_indices == (index,)}


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gdp-h-", dir="/tmp"))  # unix socket paths are short
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start_node(plugin_dir: Path, fake: FakeNvml, config: HealthConfig = FAST) -> Node:
    resources = {GPU: whole_gpus(fake, GPU), SHARED: replicas(fake, 4, SHARED)}
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    managers = [PluginManager(resource, plugin_dir, timing=TIMING) for resource in resources.values()]
    for manager in managers:
        manager.start()
    for name in resources:
        kubelet.wait_for_connection(name, timeout_s=WAIT_S)
    watcher = HealthWatcher(
        fake, [g.index for g in fake.gpus()], config, listeners=[r.on_health_transition for r in resources.values()]
    )
    watcher.start()
    return Node(fake, resources, watcher, managers, kubelet)


@pytest.fixture
def node(plugin_dir: Path, fake: FakeNvml) -> Iterator[Node]:
    started = start_node(plugin_dir, fake)
    yield started
    started.watcher.stop()
    for manager in started.managers:
        manager.stop()
    started.kubelet.stop()


def test_critical_xid_makes_every_device_of_the_gpu_unhealthy_in_the_kubelet(node: Node) -> None:
    node.fake.test_hooks.inject(HealthEvent(3, HealthEventKind.XID, xid=79))
    node.wait_unhealthy(GPU, node.ids_of_gpu(GPU, 3))
    node.wait_unhealthy(SHARED, node.ids_of_gpu(SHARED, 3))
    assert len(node.unhealthy(SHARED)) == 4  # every replica of the shared GPU
    assert len(node.kubelet.latest_devices(SHARED)) == 32  # still the full list


def test_an_ignored_xid_leaves_the_device_healthy(node: Node) -> None:
    node.fake.test_hooks.inject(HealthEvent(3, HealthEventKind.XID, xid=43))
    node.fake.test_hooks.inject(HealthEvent(5, HealthEventKind.XID, xid=94))  # handled after the first: a barrier
    node.wait_unhealthy(GPU, node.ids_of_gpu(GPU, 5))


def test_a_recovered_device_is_healthy_again_after_the_quiet_period(node: Node) -> None:
    node.fake.test_hooks.inject(HealthEvent(2, HealthEventKind.DOUBLE_BIT_ECC))
    node.wait_unhealthy(GPU, node.ids_of_gpu(GPU, 2))
    node.fake.test_hooks.recover(2)
    node.wait_unhealthy(GPU, set())
    node.wait_unhealthy(SHARED, set())


def test_the_kubelet_admits_around_an_unhealthy_gpu(node: Node) -> None:
    node.fake.test_hooks.set_lost(0)
    node.wait_unhealthy(GPU, node.ids_of_gpu(GPU, 0))
    with pytest.raises(RuntimeError, match="Available: 7"):
        node.kubelet.admit(GPU, 8)
    admission = node.kubelet.admit(GPU, 7)
    assert node.ids_of_gpu(GPU, 0).isdisjoint(admission.preferred)


def test_event_set_failure_makes_devices_unhealthy_with_the_reason(plugin_dir: Path, fake: FakeNvml) -> None:
    fake.test_hooks.fail_event_set_creation("Unknown Error")
    node = start_node(plugin_dir, fake)
    try:
        node.wait_list(GPU, lambda listed: all(d.health == "Unhealthy" for d in listed))
        node.wait_list(SHARED, lambda listed: all(d.health == "Unhealthy" for d in listed))
        reasons = {d.health_reason for d in node.resources[SHARED].snapshot().devices}
        assert reasons == {
            "health watch failed: event set cannot be created: NVML nvmlEventSetCreate failed: Unknown Error"
        }
        fake.test_hooks.fail_event_set_creation(None)
        node.wait_unhealthy(GPU, set())
    finally:
        node.watcher.stop()
        for manager in node.managers:
            manager.stop()
        node.kubelet.stop()


def test_faults_from_a_file_reach_the_kubelet(node: Node, tmp_path: Path) -> None:
    path = tmp_path / "faults.jsonl"
    tail = FakeEventsTail(path, node.fake.test_hooks.inject, poll_interval_s=0.01)
    tail.start()
    try:
        with path.open("a") as file:
            file.write('{"gpu": 6, "xid": 79}\nthis is not json\n')
        node.wait_unhealthy(SHARED, node.ids_of_gpu(SHARED, 6))
        with path.open("a") as file:
            file.write('{"gpu": 6, "recovered": true}\n')
        node.wait_unhealthy(SHARED, set())
        assert (tail.applied, tail.skipped) == (2, 1)
    finally:
        tail.stop()
