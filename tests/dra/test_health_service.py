"""DRAResourceHealth (v1 and v1alpha1) over the real DRA socket, with a kubelet-side stand-in as the client.

The registration lists both versions; each stream sends the complete list of our devices at once, on every
health transition the runtime delivers (the same ones that taint the slices), and again every heartbeat so
the kubelet never times a device out to Unknown. (Misbehaving watchers: tests/adversarial/dra.)
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from dataclasses import replace

import grpc
import pytest

from api import pluginregistration_pb2 as reg_pb2
from api import pluginregistration_pb2_grpc as reg_grpc
from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.dra_helper.service.health_service import HEALTH_TIMEOUT_S
from device_plugin.node.runtime import NodeRuntime
from device_plugin.standins.kubelet_dra import DraKubeletStandin, HealthWatch
from testbed.dra_node import NODE, Node, eventually
from tests.dra.test_health_driver import started
from tests.probes_held import probes_held

HEALTHY, UNHEALTHY, UNKNOWN = 1, 2, 0
VERSIONS = ["v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"]


@pytest.fixture
def node() -> Iterator[Node]:
    yield from started("dgx1-v100")


def start(node: Node, heartbeat_s: float = 10.0, *, health_enabled: bool = True) -> DraFrontEnd:
    """The runtime with the DRA front-end, as Node.start() does, with a chosen heartbeat."""
    config = node.load()
    if not health_enabled:
        config = replace(config, daemon=replace(config.daemon, health=replace(config.daemon.health, enabled=False)))
    front_end = DraFrontEnd.for_config(
        config, api_client(node.api.host), node_name=NODE, backoff_max_s=0.2, health_heartbeat_s=heartbeat_s
    )
    node.runtime = NodeRuntime(node.fake, config, front_end)
    node.runtime.start()
    return front_end


def test_the_registration_lists_both_health_versions_and_the_kubelet_prefers_v1(node: Node) -> None:
    start(node)
    plugin = node.kubelet().wait_for_plugin()
    assert plugin.health_version == "v1.DRAResourceHealth"
    assert _listed(node) == ["v1.DRAPlugin", "v1beta1.DRAPlugin", *VERSIONS]
    older = DraKubeletStandin(node.root / "plugins_registry", known_health=("v1alpha1.DRAResourceHealth",))
    older_plugin = older.wait_for_plugin()  # a 1.34-1.36 kubelet knows v1alpha1 only: it is listed too
    assert older_plugin.health_version == "v1alpha1.DRAResourceHealth" and older_plugin.endpoint == plugin.endpoint
    watch = older.watch_health(older_plugin)
    try:
        assert watch.until(lambda d: len(d) == 8)
    finally:
        watch.close()


def _listed(node: Node) -> list[str]:
    (sock,) = (node.root / "plugins_registry").glob("*.sock")
    with grpc.insecure_channel(f"unix://{sock}") as channel:
        info = reg_grpc.RegistrationStub(channel).GetInfo(reg_pb2.InfoRequest(), timeout=5)
    return list(info.supported_versions)


@pytest.mark.parametrize("version", VERSIONS, ids=VERSIONS)
def test_a_stream_shows_every_device_then_the_fault_then_the_recovery(node: Node, version: str) -> None:
    start(node)
    kubelet = node.kubelet()
    watch = kubelet.watch_health(kubelet.wait_for_plugin(), version)
    try:
        first = watch.next()
        assert first is not None
        devices = {d.device.device_name: d for d in first.devices}  # type: ignore[attr-defined]
        assert sorted(devices) == sorted(f"gpu-{i}" for i in range(8))
        assert {d.device.pool_name for d in devices.values()} == {NODE}
        assert {d.health for d in devices.values()} == {HEALTHY}
        assert {d.health_check_timeout_seconds for d in devices.values()} == {HEALTH_TIMEOUT_S}
        assert all(abs(d.last_updated_time - time.time()) < 60 for d in devices.values())
        with probes_held(node.fake):  # the LOST event, not a probe that sees the loss first, decides the message
            node.fake.test_hooks.set_lost(3, "test")
            sick = watch.until(lambda d: d["gpu-3"][0] == UNHEALTHY)
        assert "GPU lost" in sick["gpu-3"][1] and {h for n, (h, _) in sick.items() if n != "gpu-3"} == {HEALTHY}
        node.fake.test_hooks.recover(3)
        assert watch.until(lambda d: d["gpu-3"] == (HEALTHY, ""))
    finally:
        watch.close()


def test_the_same_transition_taints_the_slice_and_reaches_the_health_stream(node: Node) -> None:
    start(node)
    kubelet = node.kubelet()
    watch = kubelet.watch_health(kubelet.wait_for_plugin())
    try:
        watch.next()
        node.fake.test_hooks.set_lost(5, "test")
        watch.until(lambda d: d["gpu-5"][0] == UNHEALTHY)
        assert eventually(lambda: "gpu-5" not in node.published() and len(node.listed()) == 8)
    finally:
        watch.close()


def test_without_changes_the_list_is_sent_again_each_heartbeat(node: Node) -> None:
    start(node, heartbeat_s=0.2)
    kubelet = node.kubelet()
    watch = kubelet.watch_health(kubelet.wait_for_plugin())
    try:
        first, second = watch.next(), watch.next(timeout_s=5.0)  # nothing changed in between
        assert first is not None and second is not None
        assert [(d.device.device_name, d.health) for d in second.devices] == [  # type: ignore[attr-defined]
            (d.device.device_name, d.health)
            for d in first.devices  # type: ignore[attr-defined]
        ]
    finally:
        watch.close()


def test_health_checks_off_say_unknown_not_healthy(node: Node) -> None:
    start(node, health_enabled=False)
    kubelet = node.kubelet()
    watch = kubelet.watch_health(kubelet.wait_for_plugin())
    try:
        devices = watch.until(lambda d: len(d) == 8)
        assert {h for h, _ in devices.values()} == {UNKNOWN}
        assert {m for _, m in devices.values()} == {"health checks are disabled"}
    finally:
        watch.close()


def test_a_stream_ends_when_the_driver_stops(node: Node) -> None:
    start(node)
    kubelet = node.kubelet()
    watch: HealthWatch = kubelet.watch_health(kubelet.wait_for_plugin())
    try:
        assert watch.next() is not None
        node.stop()
        deadline = time.monotonic() + 10.0
        ended = False
        while time.monotonic() < deadline and not ended:
            try:
                ended = watch.next(timeout_s=0.5) is None
            except queue.Empty:
                continue
        assert ended
    finally:
        watch.close()
