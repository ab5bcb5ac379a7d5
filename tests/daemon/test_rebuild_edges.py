"""Rebuild edge cases: stop racing a rebuild, MIG slots that move under kept IDs, our own settings that
change without touching what is served, and a ConfigMap-style update of the watched config file."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from device_plugin.config.watch import ConfigFileWatch

from .harness import GPU, WAIT_S, Node

SHARED = (
    "version: v1\nsharing: {timeSlicing: {renameByDefault: true, resources: [{name: nvidia.com/gpu, replicas: 2}]}}\n"
)


def test_after_stop_a_rebuild_serves_nothing(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    node.config_file.write_text(
        "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}\n"
    )
    node.daemon.stop()
    assert not node.daemon.rebuild()
    assert node.plugin_sockets() == []


def test_a_stop_waits_for_a_rebuild_in_progress_then_stops_what_it_served(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    node.config_file.write_text(SHARED)
    rebuilding = threading.Thread(target=node.daemon.rebuild)
    rebuilding.start()
    node.daemon.stop()
    rebuilding.join(WAIT_S)
    assert node.plugin_sockets() == []
    for connection in node.kubelet.connections:
        assert connection.stream_ended or not connection.lists, connection.resource_name


INDEX_IDS = ("h100-mig-mixed", {"MIG_STRATEGY": "mixed", "DEVICE_ID_STRATEGY": "index"})


@pytest.mark.parametrize("node", [INDEX_IDS], indirect=True, ids=["h100-mig-mixed-index-ids"])
def test_a_mig_device_whose_slot_moves_is_re_served_with_its_new_index(node: Node) -> None:
    resource = "nvidia.com/mig-3g.40gb"
    node.kubelet.wait_for_connection(resource, timeout_s=WAIT_S)
    gpu = next(
        g.index
        for g in node.fake.gpus()
        if [d.profile for d in node.fake.mig_devices(g.index)][:1] == ["2g.20gb"]
        and any(d.profile == "3g.40gb" for d in node.fake.mig_devices(g.index))
    )
    keep = [d for d in node.fake.mig_devices(gpu) if d.profile != "2g.20gb" or d.placement_start != 0]
    node.fake.set_mig_layout(gpu, [{"profile": d.profile, "start": d.placement_start} for d in keep])
    big = next(d for d in node.fake.mig_devices(gpu) if d.profile == "3g.40gb")
    assert node.daemon.rebuild()
    served = next(r for r in node.daemon.front_end.node.resources if r.resource_name == resource)
    assert served.allocate([big.uuid]).envs["NVIDIA_VISIBLE_DEVICES"] == f"{gpu}:{big.slot}"


def test_our_own_settings_change_without_re_serving(
    node: Node, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    connection = node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    labels = tmp_path / "labels"
    node.config_file.write_text(f"version: v1\ngpuDevicePlugin: {{labelsFile: {labels}, gpuGauges: false}}\n")
    with caplog.at_level(logging.WARNING):
        assert not node.daemon.rebuild()  # nothing served changed: no empty list, no re-registration
    assert "nvidia.com/gpu.count=8\n" in labels.read_text()  # applied at once
    assert "gpuGauges changed; it takes effect when the plugin restarts" in caplog.text
    assert node.kubelet.current(GPU) is connection and not connection.stream_ended


def moved(old: Path) -> str:
    return f"labelsFile: {old.with_name('moved')}"


LABELS_EDITS = [("moved", moved, True), ("turned-off", lambda _: 'labelsFile: ""', False)]


@pytest.mark.parametrize(("edit", "new_file"), [c[1:] for c in LABELS_EDITS], ids=[c[0] for c in LABELS_EDITS])
def test_a_labels_file_moved_or_turned_off_leaves_no_stale_file(
    node: Node, tmp_path: Path, edit: Callable[[Path], str], new_file: bool
) -> None:
    """Issue 30 item 9: the old file stayed, so node-feature-discovery kept publishing its labels."""
    old = tmp_path / "labels"
    node.config_file.write_text(f"version: v1\ngpuDevicePlugin: {{labelsFile: {old}}}\n")
    node.daemon.rebuild()
    assert "nvidia.com/gpu.count=8\n" in old.read_text()
    node.config_file.write_text(f"version: v1\ngpuDevicePlugin: {{{edit(old)}}}\n")
    node.daemon.rebuild()
    assert not old.exists()
    assert (old.with_name("moved").exists()) is new_file


def test_a_labels_file_someone_else_rewrote_is_left_in_place(node: Node, tmp_path: Path) -> None:
    old = tmp_path / "labels"
    node.config_file.write_text(f"version: v1\ngpuDevicePlugin: {{labelsFile: {old}}}\n")
    node.daemon.rebuild()
    old.write_text("example.com/theirs=true\n")
    node.config_file.write_text('version: v1\ngpuDevicePlugin: {labelsFile: ""}\n')
    node.daemon.rebuild()
    assert old.read_text() == "example.com/theirs=true\n"


def test_a_mode_edit_is_logged_as_needing_a_restart_and_the_plugin_keeps_serving(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    connection = node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    node.config_file.write_text("version: v1\ngpuDevicePlugin: {mode: dra}\n")
    with caplog.at_level(logging.WARNING):
        assert not node.daemon.rebuild()
    assert "gpuDevicePlugin.mode changed; it takes effect when the plugin restarts" in caplog.text
    assert node.daemon.config.daemon.mode == "device-plugin"
    assert node.kubelet.current(GPU) is connection and not connection.stream_ended


def test_the_config_watch_survives_configmap_style_updates(tmp_path: Path) -> None:
    # The kubelet's atomic writer: <dir>/..<ts>/config.yaml, <dir>/..data -> ..<ts>, config.yaml -> ..data/...
    def publish(version: int) -> None:
        stamp = tmp_path / f"..ts{version}"
        stamp.mkdir()
        (stamp / "config.yaml").write_text(f"version: v1\n# {version}\n")
        (tmp_path / "..data_tmp").symlink_to(stamp.name)
        os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
        old = tmp_path / f"..ts{version - 1}"
        if old.exists():
            (old / "config.yaml").unlink()
            old.rmdir()

    publish(1)
    (tmp_path / "config.yaml").symlink_to("..data/config.yaml")
    changed = threading.Event()
    watch = ConfigFileWatch(tmp_path / "config.yaml", changed.set)
    watch.start()
    try:
        for version in (2, 3, 4):
            changed.clear()
            publish(version)
            assert changed.wait(WAIT_S), f"update {version} went unnoticed"
    finally:
        watch.stop()


UNRENAMED_SHARING = "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}\n"
REPLICA_INFO = "gpu_device_plugin_replica_info"


def test_a_resource_that_stops_being_shared_drops_its_replica_series(node: Node) -> None:
    # nvidia.com/gpu keeps its name through both reloads: only the replica series tell the two apart.
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    node.config_file.write_text(UNRENAMED_SHARING)
    assert node.daemon.rebuild()
    assert node.sample(REPLICA_INFO, resource=GPU) == 1
    node.config_file.write_text("version: v1\n")
    assert node.daemon.rebuild()
    assert node.sample(REPLICA_INFO, resource=GPU) == 0


SHARE_GPU_6 = (
    "version: v1\n"
    "sharing: {timeSlicing: {renameByDefault: true, resources: [{name: nvidia.com/gpu, replicas: 2, devices: [6]}]}}\n"
)


def test_a_reload_the_gpus_cannot_serve_yet_is_applied_once_they_can(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    node.fake.set_gpu_count(4)  # GPUs 4..7 fell off the bus
    assert node.daemon.rebuild()
    node.config_file.write_text(SHARE_GPU_6)
    assert not node.daemon.rebuild()  # GPU 6 is not there: the running config keeps serving
    node.fake.set_gpu_count(5)
    assert node.daemon.rebuild()  # a hardware change is still served, with the running config
    assert node.daemon.front_end.node.layout().keys() == {GPU}
    node.fake.set_gpu_count(8)
    assert node.daemon.rebuild()
    assert node.daemon.front_end.node.layout().keys() == {GPU, GPU + ".shared"}
