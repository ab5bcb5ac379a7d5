"""Idle, unread and slow ListAndWatch streams from any local client must never starve the kubelet's calls.

Reproduces issue 11: with a 32-worker thread pool and one worker held per stream, 31 idle streams made
every Allocate and GetPreferredAllocation hit DEADLINE_EXCEEDED. The bound asserted here is the issue's
contract (answered within 1 s), not a performance figure.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import grpc
import pytest

from api import deviceplugin_pb2 as pb
from api import deviceplugin_pb2_grpc as pb_grpc
from device_plugin.core.devices import Health
from tests.integration.conftest import Node, start_node

CONTRACT_S = 1.0  # the bound on Allocate / GetPreferredAllocation while streams are open


@pytest.fixture
def node() -> Iterator[Node]:
    path = Path(tempfile.mkdtemp(prefix="gdp-", dir="/tmp"))  # short: unix socket paths max 107 bytes
    started = start_node(path)
    yield started
    started.manager.stop()
    started.kubelet.stop()
    shutil.rmtree(path, ignore_errors=True)


def _open_streams(socket: Path, count: int, *, read: bool) -> tuple[list[grpc.Channel], list[object]]:
    """`count` ListAndWatch streams, each on its own connection; read=False leaves them unread.

    With read=True each stream's first list is read (bounded: a starved server never sends it), so
    the streams are established and idle when this returns."""
    channels, calls = [], []
    for _ in range(count):
        channel = grpc.insecure_channel(f"unix://{socket}")
        channels.append(channel)
        calls.append(pb_grpc.DevicePluginStub(channel).ListAndWatch(pb.Empty()))
    if read:
        with ThreadPoolExecutor(max_workers=count) as pool:
            firsts = [pool.submit(next, call) for call in calls]  # type: ignore[call-overload]
            done, _ = wait(firsts, timeout=10.0)
            answered = sum(1 for f in done if f.exception() is None)
            if answered < count:
                _close(channels, calls)  # ends the waiting reads, so the pool can shut down
            assert answered == count, f"only {answered} of {count} streams got their first list"
    return channels, calls


def _close(channels: list[grpc.Channel], calls: list[object]) -> None:
    for call in calls:
        call.cancel()  # type: ignore[attr-defined]
    for channel in channels:
        channel.close()


@pytest.mark.parametrize(
    ("streams", "read"),
    [(40, True), (40, False)],
    ids=["40-idle-streams", "40-unread-streams"],
)
def test_open_streams_never_delay_the_kubelets_calls(node: Node, streams: int, read: bool) -> None:
    socket = node.dir / "nvidia-gpu.sock"
    channels, calls = _open_streams(socket, streams, read=read)
    try:
        stub = node.connection.stub
        ids = [d.id for d in node.resource.snapshot().devices]
        preferred = stub.GetPreferredAllocation(
            pb.PreferredAllocationRequest(
                container_requests=[pb.ContainerPreferredAllocationRequest(available_deviceIDs=ids, allocation_size=2)]
            ),
            timeout=CONTRACT_S,
        )
        chosen = list(preferred.container_responses[0].deviceIDs)
        assert len(chosen) == 2
        allocated = stub.Allocate(
            pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=chosen)]),
            timeout=CONTRACT_S,
        )
        assert allocated.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"]
        # A fresh client (a new connection) is served too.
        with grpc.insecure_channel(f"unix://{socket}") as fresh:
            options = pb_grpc.DevicePluginStub(fresh).GetDevicePluginOptions(
                pb.Empty(), timeout=CONTRACT_S, wait_for_ready=True
            )
        assert options.get_preferred_allocation_available
    finally:
        _close(channels, calls)


def test_health_changes_still_reach_the_kubelet_past_many_idle_streams(node: Node) -> None:
    socket = node.dir / "nvidia-gpu.sock"
    channels, calls = _open_streams(socket, 40, read=True)
    try:
        before = len(node.connection.lists)
        node.resource.set_gpu_health(3, Health.UNHEALTHY, "Xid 79 (test)")
        node.kubelet.wait_for(
            lambda: (
                len(node.connection.lists) > before and any(d.health == "Unhealthy" for d in node.connection.lists[-1])
            ),
            timeout_s=5.0,
        )
        # Every other stream gets the same full snapshot.
        response = next(calls[-1])  # type: ignore[call-overload]
        assert len(response.devices) == 8
        assert sum(d.health == "Unhealthy" for d in response.devices) == 1
    finally:
        _close(channels, calls)
