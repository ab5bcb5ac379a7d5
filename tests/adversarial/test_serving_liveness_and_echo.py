"""/healthz's liveness hears a servicer that stopped answering; a hostile request is never echoed whole.

Issue 11: with every worker held, the calls hit DEADLINE_EXCEEDED while /healthz still answered 200;
a 10,000-ID request came back whole in the status message (380 KB).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import grpc
import pytest

from api import deviceplugin_pb2 as pb
from device_plugin.allocation.protocols import ValidatedRequest
from device_plugin.allocation.resources import ResourceManager
from device_plugin.core.names import GPU_RESOURCE
from device_plugin.dp_helper.lifecycle import PROBE_MAX_AGE_S
from device_plugin.nvml.backends import open_backend
from device_plugin.serving import event_loop
from testbed.allocation_doubles import EnvVarResponseBuilder, LowestIndexPolicy
from tests.composed import gpu_devices
from tests.daemon.harness import Node as DaemonNode
from tests.daemon.harness import daemon_node
from tests.integration.conftest import WAIT_S, Node, start_node

GPUS = [gpu.uuid for gpu in open_backend("dgx1-v100").gpus()]
MAX_DETAILS_CHARS = 2048  # what a status message may grow to, whatever the request
SERVING = (True, "serving nvidia.com/gpu")
T = TypeVar("T")


def _until(read: Callable[[], T], wanted: T) -> T:
    """Reads again (each read past PROBE_MAX_AGE_S probes anew) until `wanted` or WAIT_S: a loaded machine
    can stall the servicer past one probe's 1 s deadline; the last read is returned for the assertion."""
    deadline = time.monotonic() + WAIT_S
    value = read()
    while value != wanted and time.monotonic() < deadline:
        time.sleep(0.05)
        value = read()
    return value


class StuckPolicy:
    """A policy that hangs until released: the servicer stops answering while it runs."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def choose(self, request: ValidatedRequest) -> tuple[str, ...]:
        self.entered.set()
        self.release.wait(30.0)
        return LowestIndexPolicy().choose(request)


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gdp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def node(plugin_dir: Path) -> Iterator[Node]:
    started = start_node(plugin_dir)
    yield started
    started.manager.stop()
    started.kubelet.stop()


def _preferred_request(available: Sequence[str], size: int) -> pb.PreferredAllocationRequest:
    return pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=list(available), allocation_size=size)
        ]
    )


def test_liveness_fails_while_the_servicer_hangs_and_recovers_after(plugin_dir: Path) -> None:
    policy = StuckPolicy()
    devices = gpu_devices(open_backend("dgx1-v100").gpus())
    resource = ResourceManager(GPU_RESOURCE, devices, policy, EnvVarResponseBuilder())
    node = start_node(plugin_dir, resource=resource)
    try:
        assert _until(node.manager.serving, SERVING) == SERVING
        stuck = threading.Thread(
            target=lambda: node.connection.stub.GetPreferredAllocation(_preferred_request(GPUS, 2), timeout=30.0),
            daemon=True,
        )
        stuck.start()
        assert policy.entered.wait(10.0)
        time.sleep(PROBE_MAX_AGE_S)  # past the cached healthy answer
        ok, detail = node.manager.serving()
        assert not ok
        assert "nvidia-gpu.sock did not answer GetDevicePluginOptions within 1 s (DEADLINE_EXCEEDED)" in detail
        policy.release.set()
        stuck.join(10.0)
        time.sleep(PROBE_MAX_AGE_S)
        assert _until(node.manager.serving, SERVING) == SERVING
    finally:
        policy.release.set()
        node.manager.stop()
        node.kubelet.stop()


HOSTILE = [f"GPU-{i:08d}-hostile-id-that-is-rather-long" for i in range(10_000)]


@pytest.mark.parametrize(
    "call",
    [
        lambda stub: stub.Allocate(
            pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=HOSTILE)]), timeout=10
        ),
        lambda stub: stub.Allocate(
            pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=HOSTILE + HOSTILE)]),
            timeout=10,
        ),
        lambda stub: stub.GetPreferredAllocation(_preferred_request(HOSTILE, 2), timeout=10),
        lambda stub: stub.GetPreferredAllocation(
            pb.PreferredAllocationRequest(
                container_requests=[
                    pb.ContainerPreferredAllocationRequest(
                        available_deviceIDs=GPUS, must_include_deviceIDs=HOSTILE, allocation_size=8
                    )
                ]
            ),
            timeout=10,
        ),
    ],
    ids=["allocate-unknown", "allocate-duplicates", "preferred-unknown", "preferred-must-include-outside"],
)
def test_a_10000_id_request_is_not_echoed_whole(node: Node, call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as caught:
        call(node.connection.stub)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    details = caught.value.details()
    assert len(details) <= MAX_DETAILS_CHARS, f"{len(details)} characters"
    assert "more)" in details and "characters)" not in details  # the ID list is cut, saying how many
    assert "GPU-00000000-hostile" in details or "duplicates" in details


@pytest.fixture
def daemon(request: pytest.FixtureRequest) -> Iterator[DaemonNode]:
    yield from daemon_node(request)


def test_healthz_of_the_daemon_fails_while_the_serving_loop_is_wedged(daemon: DaemonNode) -> None:
    daemon.kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=10.0)
    assert _until(lambda: daemon.get("/healthz")[0], 200) == 200
    release = threading.Event()
    event_loop.call_soon(release.wait, 20.0)  # a handler that never returns holds the loop like this
    try:
        time.sleep(PROBE_MAX_AGE_S)  # past the cached healthy answer
        status, body = daemon.get("/healthz")
        assert status == 503
        assert "did not answer GetDevicePluginOptions within 1 s" in body
    finally:
        release.set()
    time.sleep(PROBE_MAX_AGE_S)
    assert _until(lambda: daemon.get("/healthz")[0], 200) == 200
