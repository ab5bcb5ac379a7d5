"""Replacing the plugin on a node under a steady stream of 1-GPU pod admissions (issue 31).

The kubelet stand-in plays both kubelet generations: `clients_by_socket=True` keeps plugins by (resource,
socket) like kubelets with PR 135437, the default one client per resource name like those before it.
What the node advertised is read from the stand-in's record of every change, so a brief zero counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from testbed.plugin_rolling import GPU, POD_A, POD_B, WAIT_S, plugin, replace_plugin, wait_ready

GPUS = 8  # dgx1-v100


@pytest.fixture(params=[True, False], ids=["kubelet-tracks-plugins-by-socket", "kubelet-one-plugin-per-name"])
def kubelet(request: pytest.FixtureRequest, plugin_dir: Path) -> Iterator[KubeletStandIn]:
    standin = KubeletStandIn(plugin_dir, clients_by_socket=request.param)
    standin.start()
    yield standin
    standin.stop()


def new_kubelet(plugin_dir: Path) -> KubeletStandIn:
    standin = KubeletStandIn(plugin_dir, clients_by_socket=True)
    standin.start()
    return standin


def wait_until(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


@pytest.mark.parametrize(
    "names",
    [("per-instance", "per-instance"), ("fixed", "per-instance")],
    ids=["rolling-between-per-instance-pods", "switching-from-fixed-names-to-per-instance"],
)
def test_rolling_replacement_never_leaves_the_node_without_gpus(plugin_dir: Path, names: tuple[str, str]) -> None:
    kubelet = new_kubelet(plugin_dir)
    outcome, new = replace_plugin(kubelet, plugin_dir, rolling=True, names=names)
    try:
        assert outcome.failures == ()
        assert outcome.zero_s == 0.0
        assert outcome.sampled_min == GPUS
        assert outcome.healthy_at_end == GPUS
        assert outcome.admitted >= 60
        # A left without an empty list; B is the node's plugin now.
        old_sockets = [c for c in kubelet.connections if c.endpoint != f"nvidia-gpu-{POD_B}.sock"]
        assert old_sockets and all(len(listed) == GPUS for c in old_sockets for listed in c.lists)
        assert all(c.stream_ended for c in old_sockets)
        assert kubelet.current(GPU).endpoint == f"nvidia-gpu-{POD_B}.sock"
        assert sorted(p.name for p in plugin_dir.iterdir()) == ["kubelet.sock", f"nvidia-gpu-{POD_B}.sock"]
    finally:
        new.stop()
        kubelet.stop()


def test_todays_replacement_with_the_fixed_name_leaves_a_gap(plugin_dir: Path, kubelet: KubeletStandIn) -> None:
    outcome, new = replace_plugin(kubelet, plugin_dir, rolling=False)
    try:
        assert outcome.zero_s > 0.0  # from A's empty list until B's first list
        assert outcome.failures  # pods that arrived in the gap, or just before it on the plugin going away
        assert {f.split(";")[0].split(":")[0] for f in outcome.failures} <= {
            "no healthy devices present",
            "endpoint nvidia-gpu.sock has been stopped",
            "UNAVAILABLE",
            "CANCELLED",
        }
        assert outcome.healthy_at_end == GPUS  # B serves the same name afterwards
        # A sent the empty list (on its last connection: a loaded box may have made A register twice).
        *old, new_connection = kubelet.connections
        emptied = [c for c in old if c.lists[-1:] == [()]]
        assert emptied and len(emptied[-1].lists[0]) == GPUS
        assert new_connection.endpoint == "nvidia-gpu.sock" and len(new_connection.lists[-1]) == GPUS
    finally:
        new.stop()


def test_per_instance_names_on_a_kubelet_with_one_plugin_per_name_lose_the_gpus(plugin_dir: Path) -> None:
    """Why `fixed` is the default: before PR 135437 the old instance's leaving disconnects the resource."""
    kubelet = KubeletStandIn(plugin_dir, clients_by_socket=False)
    kubelet.start()
    outcome, new = replace_plugin(kubelet, plugin_dir, rolling=True)
    try:
        assert outcome.healthy_at_end == 0
        assert outcome.failures[-1].startswith("no healthy devices present")
        assert new.front_end.readiness().ok  # B still thinks it is registered: nothing recovers by itself
        assert not kubelet.current(GPU).stream_ended
    finally:
        new.stop()
        kubelet.stop()


@pytest.mark.parametrize("names", ["fixed", "per-instance"], ids=["fixed-name", "per-instance-name"])
def test_the_last_instance_leaving_still_sends_the_empty_list(plugin_dir: Path, names: str) -> None:
    """An uninstall: nobody else serves the resource, so the kubelet must hear that the GPUs are gone."""
    kubelet = new_kubelet(plugin_dir)
    daemon = plugin(plugin_dir, POD_A, names)
    try:
        daemon.start()
        wait_ready(daemon)
        connection = kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
        daemon.stop()
        kubelet.wait_for(lambda: connection.stream_ended or None, WAIT_S)
        assert [len(listed) for listed in connection.lists] == [GPUS, 0]
        assert kubelet.healthy_count(GPU) == 0
        assert [p.name for p in plugin_dir.iterdir()] == ["kubelet.sock"]
    finally:
        daemon.stop()
        kubelet.stop()


def test_readiness_is_green_only_once_registered(plugin_dir: Path) -> None:
    """The DaemonSet terminates A when B is Ready: B must not be Ready while it only serves its socket."""
    daemon = plugin(plugin_dir, POD_B, "per-instance")
    daemon.start()
    kubelet = KubeletStandIn(plugin_dir, clients_by_socket=True)
    try:
        socket = plugin_dir / f"nvidia-gpu-{POD_B}.sock"
        wait_until(socket.is_socket)
        assert not daemon.front_end.readiness().ok  # serving, but no kubelet to register with
        kubelet.start()
        wait_ready(daemon)
        assert kubelet.current(GPU).endpoint == socket.name
    finally:
        daemon.stop()
        kubelet.stop()
