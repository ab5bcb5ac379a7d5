"""What the kubelet stand-in sees for each MIG strategy and time-slicing config: names and counts."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from device_plugin.config.loader import load_config
from device_plugin.dp.front_end import device_plugin_runtime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from tests.mig.test_strategy import H100_MIG_MIXED_RESOURCES

from .harness import TIMING, WAIT_S

SLICED = "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 3}]}}"
SLICED_RENAMED = "sharing: {timeSlicing: {renameByDefault: true, resources: [{name: nvidia.com/gpu, replicas: 2}]}}"
SLICED_MIG = (
    "flags: {migStrategy: mixed}\n"
    "sharing: {timeSlicing: {resources: [{name: nvidia.com/mig-1g.5gb, replicas: 2, rename: mig-small-shared}]}}"
)
CASES = [
    ("h100-mig-mixed", "flags: {migStrategy: none}", {"nvidia.com/gpu": 4}),
    ("a100-mig-7x1g", "flags: {migStrategy: single}", {"nvidia.com/gpu": 56}),
    ("h100-mig-mixed", "flags: {migStrategy: mixed}", H100_MIG_MIXED_RESOURCES),
    ("dgx1-v100", SLICED, {"nvidia.com/gpu": 8 * 3}),
    ("dgx1-v100", SLICED_RENAMED, {"nvidia.com/gpu.shared": 8 * 2}),
    ("a100-mig-7x1g", SLICED_MIG, {"nvidia.com/mig-small-shared": 56 * 2}),
]
IDS = ["mig-none", "mig-single", "mig-mixed", "time-slicing", "time-slicing-renamed", "time-slicing-mig"]


@pytest.mark.parametrize(("machine", "config_text", "expected"), CASES, ids=IDS)
def test_kubelet_sees_the_resources_and_counts(machine: str, config_text: str, expected: dict[str, int]) -> None:
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-r-", dir="/tmp"))
    config_file = plugin_dir.parent / f"{plugin_dir.name}.yaml"
    config_file.write_text(f"version: v1\n{config_text}\n")
    config = load_config(config_file=config_file, env={"DEVICE_PLUGIN_DIR": str(plugin_dir), "METRICS_ADDRESS": ""})
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    daemon = device_plugin_runtime(FakeNvml.from_machine(machine), config, timing=TIMING)
    daemon.start()
    try:
        for name, count in expected.items():
            connection = kubelet.wait_for_connection(name, timeout_s=WAIT_S)
            kubelet.wait_for(lambda c=connection: bool(c.lists) or None, WAIT_S)
            listed = kubelet.latest_devices(name)
            assert len(listed) == count and all(d.health == "Healthy" for d in listed)
        assert {r.resource_name for r in daemon.front_end.node.resources} == set(expected)
    finally:
        daemon.stop()
        kubelet.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)
        config_file.unlink(missing_ok=True)
