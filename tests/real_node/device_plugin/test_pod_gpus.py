"""GPUs per pod on /metrics, from the real kubelet's pod-resources API (device-plugin mode).

The kubelet serves device plugins in /var/lib/kubelet/device-plugins whatever its root directory, and
pod-resources under its root; the daemon looks beside devicePluginDir, as on a node whose root is
/var/lib/kubelet. Here the root is elsewhere, so the test links /var/lib/kubelet/pod-resources to it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testbed.realnode.cluster import RealCluster
from testbed.realnode.our_daemon import OurDaemon
from testbed.realnode.pods import busybox_pod, delete_and_wait, start_running
from tests.real_node.device_plugin.conftest import GPU, NAMESPACE, env_of, wait_allocatable
from tests.real_node.pod_gpus import pod_gpus


@pytest.fixture
def pod_resources_linked(cluster: RealCluster) -> Iterator[None]:
    assert cluster.kubelet is not None
    link = Path("/var/lib/kubelet/pod-resources")
    if link.exists() or link.is_symlink():
        pytest.skip(f"{link} exists: another kubelet's; not replaced")
    os.symlink(cluster.kubelet.root_dir / "pod-resources", link)
    try:
        yield
    finally:
        link.unlink()


def test_metrics_name_the_pod_container_and_uuid_of_every_gpu_it_holds_until_it_is_gone(
    cluster: RealCluster, device_plugin: Callable[..., OurDaemon], pod_resources_linked: None
) -> None:
    daemon = device_plugin("--machine", "dgx1-v100")
    wait_allocatable(cluster, {GPU: "8"})
    pod = start_running(cluster, busybox_pod("holds-two", NAMESPACE, "env; sleep 3600", limits={GPU: 2}))
    held = env_of(cluster.kubectl.logs(NAMESPACE, pod["metadata"]["name"]), "NVIDIA_VISIBLE_DEVICES").split(",")
    assert pod_gpus(daemon, "holds-two") == {uuid: (NAMESPACE, "main", GPU) for uuid in held}
    delete_and_wait(cluster, NAMESPACE, "holds-two")
    assert pod_gpus(daemon, "holds-two") == {}
    assert "gpu_device_plugin_pod_resources_errors_total 0.0" in daemon.metrics()
