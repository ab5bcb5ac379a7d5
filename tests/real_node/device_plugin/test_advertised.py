"""What the real kubelet makes of our ListAndWatch: the Node's allocatable for whole GPUs, MIG and replicas."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from testbed.realnode.cluster import RealCluster
from testbed.realnode.our_daemon import OurDaemon
from testbed.realnode.pods import busybox_pod, run_to_end
from tests.real_node.device_plugin.conftest import GPU, NAMESPACE, env_of, wait_allocatable

# The shipped machines' documented counts (their description files say the same).
WHOLE_GPUS = [
    pytest.param("dgx1-v100", "8", id="dgx1-v100-8-gpus"),
    pytest.param("island-16gpu", "16", id="island-16gpu-16-gpus"),
    pytest.param("single-gpu", "1", id="single-gpu-1-gpu"),
    pytest.param("pcie-mixed-a100-t4", "6", id="pcie-mixed-a100-t4-6-gpus"),
]

# h100-mig-mixed under migStrategy mixed, as its description file's header states.
MIG_MIXED = {
    GPU: "4",
    "nvidia.com/mig-1g.10gb": "8",
    "nvidia.com/mig-1g.10gb.me": "1",
    "nvidia.com/mig-2g.20gb": "3",
    "nvidia.com/mig-3g.40gb": "2",
    "nvidia.com/mig-7g.80gb": "1",
}

TIME_SLICING = """\
version: v1
sharing:
  timeSlicing:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""


@pytest.mark.parametrize(("machine", "count"), WHOLE_GPUS)
def test_the_kubelet_advertises_every_gpu_of_the_machine(
    cluster: RealCluster, device_plugin: Callable[..., OurDaemon], machine: str, count: str
) -> None:
    device_plugin("--machine", machine)
    wait_allocatable(cluster, {GPU: count})


def test_mig_devices_are_advertised_per_profile_under_the_mixed_strategy(
    cluster: RealCluster, device_plugin: Callable[..., OurDaemon]
) -> None:
    device_plugin("--machine", "h100-mig-mixed", "--mig-strategy", "mixed")
    wait_allocatable(cluster, MIG_MIXED)
    pod = busybox_pod("mig-2g", NAMESPACE, "env", limits={"nvidia.com/mig-2g.20gb": 1})
    done, log = run_to_end(cluster, pod)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert env_of(log, "NVIDIA_VISIBLE_DEVICES").startswith("MIG-")


def test_time_sliced_replicas_are_advertised_and_a_pod_gets_one(
    cluster: RealCluster, device_plugin: Callable[..., OurDaemon], tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(TIME_SLICING)
    device_plugin("--machine", "dgx1-v100", "--config", str(config))
    wait_allocatable(cluster, {GPU: "32"})
    done, log = run_to_end(cluster, busybox_pod("replica", NAMESPACE, "env", limits={GPU: 1}))
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert env_of(log, "NVIDIA_VISIBLE_DEVICES").startswith("GPU-")
