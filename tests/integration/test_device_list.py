"""ListAndWatch: the full list at once with NUMA topology, a full list on every change, empty on stop."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import pytest

from api import deviceplugin_pb2 as pb
from api import deviceplugin_pb2_grpc as pb_grpc
from device_plugin.config.model import Config
from device_plugin.core.devices import DeviceListSnapshot, Health
from device_plugin.dp_helper.servicer import DevicePluginServicer, services_of
from device_plugin.nvml.backends import open_backend
from device_plugin.serving.bound_socket import bind_fresh
from device_plugin.standins.kubelet_device_plugin import ListedDevice
from tests.composed import build_resources

from .conftest import WAIT_S, Node, start_node


def test_first_list_has_every_gpu_with_its_numa_node(node: Node) -> None:
    expected = {gpu.uuid: (gpu.numa_node,) for gpu in open_backend("dgx1-v100").gpus()}
    first = node.connection.lists[0]
    assert {d.id: d.numa_nodes for d in first} == expected
    assert {d.health for d in first} == {"Healthy"}
    assert len({d.id for d in first}) == len(first) == 8
    assert all(0 < len(d.id) <= 63 and d.id.isprintable() for d in first)


def test_health_change_and_recovery_reach_the_stream(node: Node) -> None:
    gpu3 = open_backend("dgx1-v100").gpus()[3].uuid
    connection = node.connection
    node.resource.set_gpu_health(3, Health.UNHEALTHY, "Xid 79")

    def health_of_gpu3() -> str:
        return {d.id: d.health for d in connection.lists[-1]}[gpu3]

    node.kubelet.wait_for(lambda: health_of_gpu3() == "Unhealthy", WAIT_S)
    latest = connection.lists[-1]
    assert len(latest) == 8  # still the full list
    assert [d.id for d in latest if d.health != "Healthy"] == [gpu3]
    node.resource.set_gpu_health(3, Health.HEALTHY, "recovered")
    node.kubelet.wait_for(lambda: health_of_gpu3() == "Healthy", WAIT_S)


def test_a_second_stream_gets_the_full_list_and_both_see_updates(node: Node) -> None:
    stub = node.connection.stub
    call = stub.ListAndWatch(pb.Empty())
    received: list[list[str]] = []
    one, two = threading.Event(), threading.Event()

    def read() -> None:
        try:
            for response in call:
                received.append([d.health for d in response.devices])
                one.set()
                if len(received) == 2:
                    two.set()
        except grpc.RpcError:
            pass

    threading.Thread(target=read, daemon=True).start()
    assert one.wait(WAIT_S)
    node.resource.set_gpu_health(0, Health.UNHEALTHY, "test")
    assert two.wait(WAIT_S)
    call.cancel()
    assert received[0] == ["Healthy"] * 8
    assert received[1].count("Unhealthy") == 1
    node.kubelet.wait_for(lambda: any(d.health == "Unhealthy" for d in node.connection.lists[-1]), WAIT_S)


def test_stop_sends_an_empty_list_then_ends_the_stream(plugin_dir: Path) -> None:
    node = start_node(plugin_dir, "single-gpu")
    connection = node.connection
    node.manager.stop()
    node.kubelet.wait_for(lambda: connection.stream_ended, WAIT_S)
    node.kubelet.stop()
    assert connection.lists[0] != ()
    assert connection.lists[-1] == ()


def test_no_topology_at_all_when_a_numa_node_is_unknown(plugin_dir: Path) -> None:
    machine = plugin_dir / "partial-numa.yaml"
    machine.write_text(
        "name: partial-numa\n"
        "gpus:\n"
        "  - {model: Tesla T4, memory_mib: 15360, numa_node: 0}\n"
        "  - {model: Tesla T4, memory_mib: 15360, numa_node: null}\n"
    )
    node = start_node(plugin_dir, str(machine))
    try:
        first = node.connection.lists[0]
        assert [d.numa_nodes for d in first] == [(), ()]
        assert all(isinstance(d, ListedDevice) for d in first)
    finally:
        node.manager.stop()
        node.kubelet.stop()


def test_a_change_made_while_the_feeder_thread_starts_still_reaches_the_stream(
    plugin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The feeder thread may start late (a busy node): a change made before its first look is not lost."""
    (resource,) = build_resources(open_backend("dgx1-v100"), Config())
    gpu3 = open_backend("dgx1-v100").gpus()[3].uuid
    feeder_may_look = threading.Event()
    snapshot = resource.snapshot

    def snapshot_with_a_late_feeder() -> DeviceListSnapshot:
        if threading.current_thread().name.startswith("feed-"):
            feeder_may_look.wait(WAIT_S)
        return snapshot()

    monkeypatch.setattr(resource, "snapshot", snapshot_with_a_late_feeder)
    servicer = DevicePluginServicer(resource)
    path = plugin_dir / "late-feeder.sock"
    bound = bind_fresh(path, "late feeder", services_of(servicer))
    try:
        with grpc.insecure_channel(f"unix://{path}") as channel:
            stream = pb_grpc.DevicePluginStub(channel).ListAndWatch(pb.Empty(), timeout=WAIT_S)
            assert all(d.health == "Healthy" for d in next(stream).devices)
            resource.set_gpu_health(3, Health.UNHEALTHY, "Xid 79")
            feeder_may_look.set()
            second = next(stream)  # lost before the fix: DEADLINE_EXCEEDED
            assert [d.ID for d in second.devices if d.health == "Unhealthy"] == [gpu3]
            stream.cancel()
    finally:
        feeder_may_look.set()
        servicer.shutdown()
        bound.stop(0.0)
