"""The real kubelet asks GetPreferredAllocation, then Allocate: the container gets the allocator's best set."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from testbed.realnode.cluster import RealCluster
from testbed.realnode.our_daemon import OurDaemon
from testbed.realnode.pods import busybox_pod, delete_and_wait, run_to_end, start_running
from tests.real_node import oracle
from tests.real_node.device_plugin.conftest import GPU, NAMESPACE, env_of, wait_allocatable

MACHINE = "dgx1-v100"


@pytest.fixture
def dgx1(cluster: RealCluster, device_plugin: Callable[..., OurDaemon]) -> OurDaemon:
    daemon = device_plugin("--machine", MACHINE)
    wait_allocatable(cluster, {GPU: "8"})
    return daemon


@pytest.mark.parametrize("size", [1, 2, 4, 8], ids=lambda n: f"{n}-gpus-on-an-idle-node")
def test_a_pod_gets_the_allocators_best_set(cluster: RealCluster, dgx1: OurDaemon, size: int) -> None:
    done, log = run_to_end(cluster, busybox_pod(f"gpus-{size}", NAMESPACE, "env", limits={GPU: size}))
    assert done["status"]["phase"] == "Succeeded", done["status"]
    got = set(env_of(log, "NVIDIA_VISIBLE_DEVICES").split(","))
    assert got == oracle.best_set(MACHINE, size)


def test_the_second_pod_gets_the_best_set_among_the_gpus_left_free(cluster: RealCluster, dgx1: OurDaemon) -> None:
    """GetPreferredAllocation is asked with the free GPUs only: the kubelet, not we, knows which are taken."""
    first = start_running(cluster, busybox_pod("holder", NAMESPACE, "env; sleep 3600", limits={GPU: 2}))
    held = set(env_of(cluster.kubectl.logs(NAMESPACE, first["metadata"]["name"]), "NVIDIA_VISIBLE_DEVICES").split(","))
    _, log = run_to_end(cluster, busybox_pod("four", NAMESPACE, "env", limits={GPU: 4}))
    got = set(env_of(log, "NVIDIA_VISIBLE_DEVICES").split(","))
    free = {i for i, uuid in enumerate(oracle.uuids(MACHINE)) if uuid not in held}
    assert not got & held
    assert got == oracle.best_set(MACHINE, 4, free)
    delete_and_wait(cluster, NAMESPACE, "holder")


def test_every_allocation_is_logged_at_info_with_the_pod_and_the_devices(cluster: RealCluster, dgx1: OurDaemon) -> None:
    _, log = run_to_end(cluster, busybox_pod("logged", NAMESPACE, "env", limits={GPU: 2}))
    chosen = env_of(log, "NVIDIA_VISIBLE_DEVICES").split(",")
    lines = dgx1.log().splitlines()
    preferred = [line for line in lines if " INFO " in line and "GetPreferredAllocation" in line]
    allocate = [line for line in lines if " INFO " in line and "Allocate" in line and "Preferred" not in line]
    assert preferred and all(uuid in preferred[-1] for uuid in chosen), preferred
    assert allocate and all(uuid in allocate[-1] for uuid in chosen), allocate
    assert " ms" in allocate[-1] and " ms" in preferred[-1]  # how long it took
