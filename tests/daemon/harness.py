"""The daemon test harness: the device-plugin node runtime on a simulated machine, a kubelet stand-in,
and helpers to read both."""

from __future__ import annotations

import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from device_plugin.config.health import HealthConfig
from device_plugin.config.loader import load_config
from device_plugin.config.model import Config
from device_plugin.dp.front_end import DevicePluginFrontEnd, device_plugin_runtime
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from testbed.timing import FAST_LIFECYCLE

GPU = "nvidia.com/gpu"
FAST_HEALTH = HealthConfig(quiet_period_s=0.2, probe_interval_s=0.05, event_wait_s=0.05)
WAIT_S = 15.0
TIMING = FAST_LIFECYCLE
TIME_SLICING = """
version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
      - name: nvidia.com/gpu
        replicas: 2
"""


@dataclass
class Node:
    fake: FakeNvml
    daemon: NodeRuntime[DevicePluginFrontEnd]
    kubelet: KubeletStandIn
    config_file: Path
    plugin_dir: Path

    def plugin_sockets(self) -> list[str]:
        """Sockets the plugin left in the directory (the kubelet's own excluded)."""
        return sorted(p.name for p in self.plugin_dir.iterdir() if p.name != "kubelet.sock")

    def get(self, path: str) -> tuple[int, str]:
        assert self.daemon.endpoint is not None
        url = f"http://127.0.0.1:{self.daemon.endpoint.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def sample(self, name: str, **labels: str) -> float:
        _, text = self.get("/metrics")
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return sample.value
        return 0.0

    def listed(self, resource: str) -> dict[str, str]:
        return {d.id: d.health for d in self.kubelet.latest_devices(resource)}


def daemon_node(request: pytest.FixtureRequest, prepare: Callable[[FakeNvml], None] | None = None) -> Iterator[Node]:
    """The device-plugin runtime on a simulated machine with a kubelet stand-in. Param: a machine name, or
    (machine, env).
    `prepare` changes the fake before the daemon first scans it."""
    param = getattr(request, "param", "dgx1-v100")
    machine, extra_env = param if isinstance(param, tuple) else (param, {})
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-d-", dir="/tmp"))
    config_file = plugin_dir.parent / f"{plugin_dir.name}.yaml"
    config_file.write_text("version: v1\n")
    env = {"DEVICE_PLUGIN_DIR": str(plugin_dir), "METRICS_ADDRESS": "127.0.0.1:0", **extra_env}

    def load() -> Config:
        config = load_config(config_file=config_file, env=env)
        return replace(config, daemon=replace(config.daemon, health=FAST_HEALTH, rescan_interval_s=3600.0))

    fake = FakeNvml.from_machine(machine)
    if prepare is not None:
        prepare(fake)
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    daemon = device_plugin_runtime(fake, load(), load_config=load, config_file=config_file, timing=TIMING)
    daemon.start()
    started = Node(fake, daemon, kubelet, config_file, plugin_dir)
    yield started
    daemon.stop()
    kubelet.stop()
    shutil.rmtree(plugin_dir, ignore_errors=True)
    config_file.unlink(missing_ok=True)
