"""The mixed-model machine serves two resource names through the kubelet stand-in; each Allocate hands out
only its own model's GPUs, chosen by the same topology-aware allocator."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from device_plugin.config.loader import load_config
from device_plugin.dp.front_end import device_plugin_runtime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from tests.daemon.harness import TIMING, WAIT_S

CONFIG = """version: v1
flags: {plugin: {deviceListStrategy: volume-mounts}}
resources:
  gpus:
    - {pattern: "*A100*", name: a100}
    - {pattern: "Tesla T4", name: t4}
"""


def test_two_names_each_with_its_own_model() -> None:
    fake = FakeNvml.from_machine("pcie-mixed-a100-t4")
    uuids = {gpu.name: {g.uuid for g in fake.gpus() if g.name == gpu.name} for gpu in fake.gpus()}
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-rn-", dir="/tmp"))
    config_file = plugin_dir / "config.yaml"
    config_file.write_text(CONFIG)
    config = load_config(config_file=config_file, env={"DEVICE_PLUGIN_DIR": str(plugin_dir), "METRICS_ADDRESS": ""})
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    daemon = device_plugin_runtime(fake, config, timing=TIMING)
    daemon.start()
    try:
        for name, count in (("nvidia.com/a100", 2), ("nvidia.com/t4", 4)):
            kubelet.wait_for_connection(name, timeout_s=WAIT_S)
            assert len(kubelet.latest_devices(name)) == count
        assert {c.resource_name for c in kubelet.connections} == {"nvidia.com/a100", "nvidia.com/t4"}
        t4_pair = kubelet.admit("nvidia.com/t4", 2)
        a100_pair = kubelet.admit("nvidia.com/a100", 2)
        mounted = {
            name: {m.container_path.rsplit("/", 1)[-1] for m in admission.response.mounts}
            for name, admission in (("t4", t4_pair), ("a100", a100_pair))
        }
        assert mounted["t4"] <= uuids["Tesla T4"] and len(mounted["t4"]) == 2
        assert mounted["a100"] == uuids["NVIDIA A100-PCIE-40GB"]
    finally:
        daemon.stop()
        kubelet.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)
