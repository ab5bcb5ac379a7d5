"""Each device-list strategy on the real kubelet and containerd 1.6: envvar and volume-mounts reach the
container; the two CDI strategies need a runtime with CDI (containerd 1.7+ with enable_cdi, 2.0+, CRI-O),
which this node lacks (docs/support.md): for them, what the kubelet was given and passed on is asserted."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest

from api import deviceplugin_pb2 as pb
from testbed.realnode.cluster import RealCluster
from testbed.realnode.kubelet import DEVICE_PLUGIN_DIR
from testbed.realnode.our_daemon import OurDaemon
from testbed.realnode.pods import busybox_pod, run_to_end, start_running
from tests.real_node import oracle
from tests.real_node.device_plugin.conftest import GPU, NAMESPACE, env_of, wait_allocatable

MACHINE = "dgx1-v100"


def _allocations(resource: str) -> list[pb.ContainerAllocateResponse]:
    """The Allocate answers the real kubelet keeps in its device-manager checkpoint."""
    data = json.loads((DEVICE_PLUGIN_DIR / "kubelet_internal_checkpoint").read_text())
    entries = data["Data"]["PodDeviceEntries"] or []
    return [
        pb.ContainerAllocateResponse.FromString(base64.b64decode(e["AllocResp"]))
        for e in entries
        if e["ResourceName"] == resource
    ]


def test_envvar_reaches_the_container(cluster: RealCluster, device_plugin: Callable[..., OurDaemon]) -> None:
    device_plugin("--machine", MACHINE, "--device-list-strategy", "envvar")
    wait_allocatable(cluster, {GPU: "8"})
    _, log = run_to_end(cluster, busybox_pod("envvar", NAMESPACE, "env", limits={GPU: 1}))
    assert env_of(log, "NVIDIA_VISIBLE_DEVICES") in oracle.uuids(MACHINE)


def test_volume_mounts_reach_the_container(cluster: RealCluster, device_plugin: Callable[..., OurDaemon]) -> None:
    device_plugin("--machine", MACHINE, "--device-list-strategy", "volume-mounts")
    wait_allocatable(cluster, {GPU: "8"})
    command = "env; ls /var/run/nvidia-container-devices"
    _, log = run_to_end(cluster, busybox_pod("mounts", NAMESPACE, command, limits={GPU: 2}))
    assert env_of(log, "NVIDIA_VISIBLE_DEVICES") == "/var/run/nvidia-container-devices"
    listed = {line for line in log.splitlines() if line.startswith("GPU-")}
    assert len(listed) == 2 and listed <= set(oracle.uuids(MACHINE))


@pytest.mark.parametrize("strategy", ["cdi-annotations", "cdi-cri"])
def test_cdi_strategies_are_handed_to_the_kubelet_and_dropped_by_containerd_1_6(
    cluster: RealCluster, device_plugin: Callable[..., OurDaemon], strategy: str
) -> None:
    device_plugin("--machine", MACHINE, "--device-list-strategy", strategy)
    wait_allocatable(cluster, {GPU: "8"})
    pod = start_running(cluster, busybox_pod(f"{strategy}-pod", NAMESPACE, "env; sleep 3600", limits={GPU: 1}))
    log = cluster.kubectl.logs(NAMESPACE, pod["metadata"]["name"])
    assert "NVIDIA_VISIBLE_DEVICES" not in log  # nothing reached the container: the runtime has no CDI
    answers = _allocations(GPU)
    assert answers, "the kubelet kept no Allocate answer"
    latest = answers[-1]
    if strategy == "cdi-cri":
        assert [d.name[: len("nvidia.com/gpu=GPU-")] for d in latest.cdi_devices] == ["nvidia.com/gpu=GPU-"]
    else:
        annotations = latest.annotations.items()
        assert any(k.startswith("cdi.k8s.io/") and v.startswith("nvidia.com/gpu=GPU-") for k, v in annotations)
