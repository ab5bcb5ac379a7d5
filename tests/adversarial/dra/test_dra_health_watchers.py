"""DRAResourceHealth under watchers that misbehave: too many at once, one that leaves, one that never reads.

The health service shares the DRA socket and the serving loop with NodePrepareResources: a watcher must
never cost the driver more than one list, nor hold up the health delivery that also taints the slices.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from api import dra_health_v1_pb2, dra_health_v1_pb2_grpc
from device_plugin.core.devices import Health
from device_plugin.dra_helper.service.device_health import MAX_WATCHERS
from device_plugin.health.state import HealthCause, HealthTransition
from testbed.dra_node import Node, eventually
from tests.dra.test_health_driver import started
from tests.dra.test_health_service import start

UNHEALTHY, HEALTHY = 2, 1


@pytest.fixture
def node() -> Iterator[Node]:
    yield from started("dgx1-v100")


def test_watchers_past_the_bound_are_refused_and_one_that_leaves_is_forgotten(node: Node) -> None:
    driver = start(node)
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    watches = [kubelet.watch_health(plugin) for _ in range(MAX_WATCHERS)]
    try:
        for w in watches:
            assert w.next() is not None
        extra = kubelet.watch_health(plugin)
        assert extra.next() is None and extra.error is not None
        assert extra.error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
        extra.close()
        watches.pop().close()
        assert eventually(lambda: driver.health.watcher_count() == MAX_WATCHERS - 1)
        again = kubelet.watch_health(plugin)
        watches.append(again)
        assert again.next() is not None
    finally:
        for w in watches:
            w.close()
    assert eventually(lambda: driver.health.watcher_count() == 0)


def test_a_watcher_that_never_reads_holds_up_neither_health_nor_the_slices(node: Node) -> None:
    """200 transitions while one stream is never read: each is handled, the slices follow, and the stream,
    read at last, shows the newest health (wake-ups are coalesced: no backlog of lists)."""
    driver = start(node)
    plugin = node.kubelet().wait_for_plugin()
    with grpc.insecure_channel(f"unix://{plugin.endpoint}") as channel:
        stalled = dra_health_v1_pb2_grpc.DRAResourceHealthStub(channel).NodeWatchResources(
            dra_health_v1_pb2.NodeWatchResourcesRequest()
        )
        assert eventually(lambda: driver.health.watcher_count() == 1)
        for k in range(200):
            after = Health.UNHEALTHY if k % 2 == 0 else Health.HEALTHY
            cause = HealthCause.PROBE_FAILED if after is Health.UNHEALTHY else HealthCause.RECOVERED
            driver.on_health(HealthTransition(2, Health.HEALTHY, after, f"flap {k}", 0.0, cause=cause))
        driver.on_health(HealthTransition(2, Health.HEALTHY, Health.UNHEALTHY, "last", 0.0, cause=HealthCause.LOST))
        assert eventually(lambda: "gpu-2" not in node.published() and len(node.listed()) == 8)
        seen = []
        for response in stalled:
            health = {d.device.device_name: (d.health, d.message) for d in response.devices}
            seen.append(health)
            if health["gpu-2"] == (UNHEALTHY, "last"):
                break
        assert len(seen) < 50  # not one list per transition
        stalled.cancel()
    assert eventually(lambda: driver.health.watcher_count() == 0)
