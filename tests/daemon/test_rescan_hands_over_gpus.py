"""A rescan that finds another GPU hands it to the health watch and the GPU gauges, not only to the kubelet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind

from .harness import GPU, WAIT_S, Node, daemon_node


def seven_on_the_bus(fake: FakeNvml) -> None:
    fake.set_gpu_count(7)  # GPU 7 is not enumerated at start-up


@pytest.fixture
def late_gpu_node(request: pytest.FixtureRequest) -> Iterator[Node]:
    yield from daemon_node(request, prepare=seven_on_the_bus)


def test_a_gpu_found_by_a_rescan_is_served_health_watched_and_measured(late_gpu_node: Node) -> None:
    node = late_gpu_node
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    assert node.sample("gpu_device_plugin_gpu_temperature_celsius", gpu="7") == 0.0  # no series yet
    assert node.daemon.health is not None and node.daemon.health.gpu_indices == tuple(range(7))
    node.fake.set_gpu_count(8)
    assert node.daemon.rebuild()
    late = node.fake.gpus()[7].uuid
    connection = node.kubelet.wait_for_connection(GPU, count=2, timeout_s=WAIT_S)
    node.kubelet.wait_for(lambda: late in {d.id for d in connection.lists[-1]} or None, WAIT_S)
    assert node.daemon.health.gpu_indices == tuple(range(8))
    assert node.sample("gpu_device_plugin_gpu_temperature_celsius", gpu="7", uuid=late) > 0
    # Xid 48 (double-bit ECC) is critical but leaves the GPU on the bus: Xid 79 would also fail the
    # periodic probe, which may then see it first and count the transition under reason "probe".
    node.fake.test_hooks.inject(HealthEvent(7, HealthEventKind.XID, xid=48))
    node.kubelet.wait_for(lambda: node.listed(GPU).get(late) == "Unhealthy" or None, WAIT_S)
    counted = {"resource": GPU, "from_health": "Healthy", "to_health": "Unhealthy", "reason": "xid", "xid": "48"}
    # The resources hear of it first, the metrics count it next: wait for the count, then check it is one.
    node.kubelet.wait_for(lambda: node.sample("gpu_device_plugin_health_transitions_total", **counted) or None, WAIT_S)
    assert node.daemon.health.wait_delivered(WAIT_S)
    assert node.sample("gpu_device_plugin_health_transitions_total", **counted) == 1


@pytest.mark.parametrize("node", ["hgx-h100"], indirect=True, ids=["hgx-h100"])
def test_a_gpu_transition_counts_once_however_many_replicas_it_backs(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    node.config_file.write_text(
        "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}\n"
    )
    assert node.daemon.rebuild()
    connection = node.kubelet.wait_for_connection(GPU, count=2, timeout_s=WAIT_S)
    node.kubelet.wait_for(lambda: len(connection.lists[-1]) == 32 or None, WAIT_S)
    node.fake.test_hooks.inject(HealthEvent(2, HealthEventKind.DOUBLE_BIT_ECC))
    node.kubelet.wait_for(lambda: sum(1 for h in node.listed(GPU).values() if h == "Unhealthy") == 4 or None, WAIT_S)
    counted = {"resource": GPU, "from_health": "Healthy", "to_health": "Unhealthy", "reason": "unhealthy", "xid": ""}
    # The resources hear of it first, the metrics count it next: wait for the count, then check it is one.
    node.kubelet.wait_for(lambda: node.sample("gpu_device_plugin_health_transitions_total", **counted) or None, WAIT_S)
    assert node.daemon.health.wait_delivered(WAIT_S)
    assert node.sample("gpu_device_plugin_health_transitions_total", **counted) == 1
