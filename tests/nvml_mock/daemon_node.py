"""A node of the daemon tests on the mock: the device-plugin runtime (what `run` builds) over the real backend in
a host process of the test's own, reading the profile's rendered sysfs tree, and the kubelet stand-in on a real
plugin directory. The runtime, the front-end and the kubelet side are the shipped ones; only the backend lives
in another process (tests/nvml_mock/remote.py says why)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from device_plugin.config.health import HealthConfig
from device_plugin.config.loader import load_config
from device_plugin.config.model import Config
from device_plugin.core.names import GPU_RESOURCE
from device_plugin.dp.front_end import DevicePluginFrontEnd, device_plugin_runtime
from device_plugin.node.runtime import NodeRuntime
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn, ListedDevice
from testbed.timing import FAST_LIFECYCLE
from tests.nvml_mock.conftest import WAIT_S, HostPool
from tests.nvml_mock.remote import MockHost, RemoteBackend

# Short health periods so a recovery takes a moment; the behaviour is the defaults' behaviour.
FAST_HEALTH = HealthConfig(quiet_period_s=0.3, probe_interval_s=0.05, event_wait_s=0.05, retry_initial_s=0.05)


@dataclass
class MockNode:
    host: MockHost
    backend: RemoteBackend
    daemon: NodeRuntime[DevicePluginFrontEnd]
    kubelet: KubeletStandIn
    plugin_dir: Path

    def listed(self) -> dict[str, ListedDevice]:
        return {device.id: device for device in self.kubelet.latest_devices(GPU_RESOURCE)}

    def health_of(self, uuid: str) -> str:
        return self.listed()[uuid].health

    def every_list(self) -> list[tuple[ListedDevice, ...]]:
        """Every device list the plugin sent the kubelet since it registered."""
        return list(self.kubelet.current(GPU_RESOURCE).lists)

    def stop(self) -> None:
        self.daemon.stop()
        self.kubelet.stop()
        shutil.rmtree(self.plugin_dir, ignore_errors=True)


def start_node(host: MockHost, sys_root: Path) -> MockNode:
    backend = host.open_backend(sys_root)
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-m-", dir="/tmp"))  # unix socket paths: 107 bytes at most
    loaded = load_config(env={"DEVICE_PLUGIN_DIR": str(plugin_dir), "METRICS_ADDRESS": ""})
    config = replace(loaded, daemon=replace(loaded.daemon, health=FAST_HEALTH, rescan_interval_s=3600.0))

    def load() -> Config:
        return config

    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    daemon = device_plugin_runtime(backend, config, load_config=load, timing=FAST_LIFECYCLE)
    daemon.start()
    kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
    return MockNode(host, backend, daemon, kubelet, plugin_dir)


@pytest.fixture
def mock_node(mock_hosts: HostPool, own_host: Callable[[str], MockHost]) -> Iterator[Callable[[str], MockNode]]:
    """mock_node(profile): the daemon on the real backend on the profile, with the kubelet stand-in."""
    nodes: list[MockNode] = []

    def start(profile: str) -> MockNode:
        nodes.append(start_node(own_host(profile), mock_hosts.sysfs(profile)))
        return nodes[-1]

    yield start
    for node in nodes:
        node.stop()
