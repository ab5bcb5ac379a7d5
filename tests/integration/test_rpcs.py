"""GetPreferredAllocation, Allocate and PreStartContainer over the socket, valid and invalid."""

from __future__ import annotations

import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from api import deviceplugin_pb2 as pb
from device_plugin.allocation.protocols import ValidatedRequest
from device_plugin.allocation.resources import ResourceManager
from device_plugin.core.devices import Health
from device_plugin.core.names import GPU_RESOURCE
from device_plugin.nvml.backends import open_backend
from testbed.allocation_doubles import EnvVarResponseBuilder
from tests.composed import gpu_devices

from .conftest import WAIT_S, Node, start_node

GPUS = [gpu.uuid for gpu in open_backend("dgx1-v100").gpus()]


def preferred(stub, available: Sequence[str], must: Sequence[str], size: int) -> list[str]:
    request = pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=list(available), must_include_deviceIDs=list(must), allocation_size=size
            )
        ]
    )
    (response,) = stub.GetPreferredAllocation(request, timeout=WAIT_S).container_responses
    return list(response.deviceIDs)


def allocate(stub, *containers: Sequence[str]) -> pb.AllocateResponse:
    request = pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=list(c)) for c in containers]
    )
    return stub.Allocate(request, timeout=WAIT_S)


@pytest.mark.parametrize(
    ("available", "must", "size"),
    [
        (range(8), [], 1),
        (range(8), [], 4),
        (range(8), [], 8),
        (range(8), [5], 2),
        ([1, 3, 6, 7], [6, 7], 3),
        ([2, 4], [], 2),
    ],
    ids=["one-of-eight", "four-of-eight", "all-eight", "must-include-one", "must-include-two", "exact-fit"],
)
def test_preferred_allocation_is_valid_and_order_independent(
    node: Node, available: Sequence[int], must: Sequence[int], size: int
) -> None:
    ids = [GPUS[i] for i in available]
    must_ids = [GPUS[i] for i in must]
    chosen = preferred(node.connection.stub, ids, must_ids, size)
    assert len(chosen) == len(set(chosen)) == size
    assert set(must_ids) <= set(chosen) <= set(ids)
    shuffled = list(ids)
    random.Random(7).shuffle(shuffled)
    assert preferred(node.connection.stub, shuffled, list(reversed(must_ids)), size) == chosen


@pytest.mark.parametrize(
    ("available", "must", "size", "message"),
    [
        ([GPUS[0], GPUS[1]], [], 3, "exceeds"),
        ([GPUS[0], GPUS[1]], [GPUS[2]], 2, "not in available"),
        ([GPUS[0], "GPU-nonexistent"], [], 1, "unknown"),
        ([GPUS[0]], [], 0, "positive"),
        ([GPUS[0], GPUS[0]], [], 1, "duplicates"),
    ],
    ids=["size-over-available", "must-include-outside-available", "unknown-id", "size-zero", "duplicate-ids"],
)
def test_invalid_preferred_allocation_is_invalid_argument(
    node: Node, available: list[str], must: list[str], size: int, message: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        preferred(node.connection.stub, available, must, size)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert message in caught.value.details()


def test_allocate_sets_visible_devices_for_every_container_in_order(node: Node) -> None:
    response = allocate(node.connection.stub, [GPUS[2]], [GPUS[5], GPUS[4]], [GPUS[7]])
    envs = [dict(c.envs)["NVIDIA_VISIBLE_DEVICES"] for c in response.container_responses]
    assert envs == [GPUS[2], f"{GPUS[4]},{GPUS[5]}", GPUS[7]]


def test_allocating_the_same_ids_again_gives_an_equal_answer(node: Node) -> None:
    first = allocate(node.connection.stub, [GPUS[1], GPUS[0]])
    again = allocate(node.connection.stub, [GPUS[0], GPUS[1]])
    assert first == again


@pytest.mark.parametrize(
    ("containers", "message"),
    [
        ([["GPU-nonexistent"]], "unknown"),
        ([[GPUS[0]], [GPUS[1], "GPU-nonexistent"]], "unknown"),
        ([[GPUS[3]]], "unhealthy"),
        ([[]], "empty"),
        ([], "empty"),
    ],
    ids=["unknown", "unknown-in-second-container", "unhealthy", "no-ids", "no-containers"],
)
def test_invalid_allocate_is_invalid_argument_and_changes_nothing(
    node: Node, containers: list[list[str]], message: str
) -> None:
    node.resource.set_gpu_health(3, Health.UNHEALTHY, "Xid 48")
    before = node.resource.snapshot()
    with pytest.raises(grpc.RpcError) as caught:
        allocate(node.connection.stub, *containers)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert message in caught.value.details()
    assert node.resource.snapshot() == before
    assert allocate(node.connection.stub, [GPUS[0]]).container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == GPUS[0]


def test_prestart_container_is_a_no_op(node: Node) -> None:
    reply = node.connection.stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=[GPUS[0]]), timeout=WAIT_S)
    assert reply == pb.PreStartContainerResponse()


def test_hundreds_of_concurrent_rpcs_all_answered(node: Node) -> None:
    stub = node.connection.stub

    def one(i: int) -> bool:
        size = 1 + i % 8
        if i % 3 == 0:
            return len(preferred(stub, GPUS, [], size)) == size
        if i % 3 == 1:
            return len(allocate(stub, GPUS[: min(size, 7)]).container_responses) == 1  # GPU 7 flips health
        return stub.GetDevicePluginOptions(pb.Empty(), timeout=WAIT_S).get_preferred_allocation_available

    with ThreadPoolExecutor(max_workers=50) as pool:
        # ListAndWatch updates go out while the RPCs run.
        flips = [Health.UNHEALTHY, Health.HEALTHY] * 10
        flipper = pool.submit(lambda: [node.resource.set_gpu_health(7, h, "flip") for h in flips])
        results = list(pool.map(one, range(300)))
        flipper.result()
    assert all(results) and len(results) == 300
    node.kubelet.wait_for(lambda: [d.health for d in node.connection.lists[-1]] == ["Healthy"] * 8, 10.0)


class ExplodingPolicy:
    """A policy with a bug: the servicer must answer INTERNAL and keep serving."""

    def choose(self, request: ValidatedRequest) -> tuple[str, ...]:
        raise ZeroDivisionError("policy bug")


def test_handler_errors_become_internal_and_never_kill_the_server(plugin_dir: Path) -> None:
    devices = gpu_devices(open_backend("dgx1-v100").gpus())
    resource = ResourceManager(GPU_RESOURCE, devices, ExplodingPolicy(), EnvVarResponseBuilder())
    node = start_node(plugin_dir, resource=resource)
    try:
        stub = node.connection.stub
        for _ in range(3):
            with pytest.raises(grpc.RpcError) as caught:
                preferred(stub, GPUS, [], 2)
            assert caught.value.code() is grpc.StatusCode.INTERNAL
            assert "ZeroDivisionError: policy bug" in caught.value.details()
        assert len(allocate(stub, [GPUS[0]]).container_responses) == 1
        assert len(node.connection.lists[-1]) == 8
    finally:
        node.manager.stop()
        node.kubelet.stop()
