"""The kubelet's restarts, our SIGTERM and a GPU fault, as the real kubelet sees them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from testbed.realnode.cluster import RealCluster
from testbed.realnode.our_daemon import OurDaemon
from testbed.realnode.pods import busybox_pod, resource_health, run_to_end, start_running
from tests.real_node import oracle
from tests.real_node.device_plugin.conftest import GPU, NAMESPACE, env_of, wait_allocatable

MACHINE = "dgx1-v100"


def registrations(daemon: OurDaemon) -> int:
    return daemon.log().count("registered with /var/lib/kubelet/device-plugins/kubelet.sock")


def test_a_kubelet_restart_is_followed_by_a_new_registration_and_pods_run_again(
    cluster: RealCluster, device_plugin: Callable[..., OurDaemon]
) -> None:
    assert cluster.kubelet is not None
    daemon = device_plugin("--machine", MACHINE)
    wait_allocatable(cluster, {GPU: "8"})
    before = registrations(daemon)
    cluster.kubelet.restart()
    began = time.monotonic()
    cluster.kubectl.wait_for("our re-registration", lambda: registrations(daemon) > before, 20)
    took_s = time.monotonic() - began
    assert took_s < 10, f"re-registered {took_s:.1f} s after the kubelet answered again"
    cluster.wait_node_ready()
    wait_allocatable(cluster, {GPU: "8"})
    done, _ = run_to_end(cluster, busybox_pod("after-restart", NAMESPACE, "env", limits={GPU: 1}))
    assert done["status"]["phase"] == "Succeeded", done["status"]


def test_sigterm_takes_the_resource_to_zero(cluster: RealCluster, device_plugin: Callable[..., OurDaemon]) -> None:
    daemon = device_plugin("--machine", MACHINE)
    wait_allocatable(cluster, {GPU: "8"})
    assert daemon.stop() == 0
    wait_allocatable(cluster, {GPU: "0"})


def test_an_xid_shows_in_the_pods_allocated_resources_status_and_recovery_clears_it(
    cluster: RealCluster, device_plugin: Callable[..., OurDaemon], tmp_path: Any
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\ngpuDevicePlugin:\n  health:\n    quietPeriodSeconds: 3\n")
    daemon = device_plugin("--machine", MACHINE, "--config", str(config))
    wait_allocatable(cluster, {GPU: "8"})
    pod = start_running(cluster, busybox_pod("watched", NAMESPACE, "env; sleep 3600", limits={GPU: 1}))
    name = pod["metadata"]["name"]
    uuid = env_of(cluster.kubectl.logs(NAMESPACE, name), "NVIDIA_VISIBLE_DEVICES")
    daemon.inject({"gpu": oracle.index_of(MACHINE, uuid), "xid": 79})

    def health() -> str:
        return resource_health(cluster.kubectl.get("pod", "-n", NAMESPACE, name)).get(uuid, "")

    cluster.kubectl.wait_for("the pod's device Unhealthy", lambda: health() == "Unhealthy", 30)
    daemon.inject({"gpu": oracle.index_of(MACHINE, uuid), "recovered": True})
    cluster.kubectl.wait_for("the pod's device Healthy again", lambda: health() == "Healthy", 60)
