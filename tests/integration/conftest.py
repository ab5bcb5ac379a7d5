"""A simulated node for integration tests: the plugin (one PluginManager, one resource) and the kubelet
stand-in, talking over real unix sockets in a short temporary directory (unix socket paths max 107 bytes)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.model import Config
from device_plugin.core.names import GPU_RESOURCE
from device_plugin.nvml.backends import open_backend
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn, PluginConnection
from testbed.observed import ObservedPluginManager
from testbed.timing import FAST_LIFECYCLE
from tests.composed import build_resources

FAST = FAST_LIFECYCLE
WAIT_S = 10.0  # failure bound for anything the contract says must happen "within seconds"


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gdp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class Node:
    dir: Path
    resource: ResourceManager
    manager: ObservedPluginManager
    kubelet: KubeletStandIn

    @property
    def connection(self) -> PluginConnection:
        return self.kubelet.current(GPU_RESOURCE)


def start_node(plugin_dir: Path, machine: str = "dgx1-v100", *, resource: ResourceManager | None = None) -> Node:
    if resource is None:
        (resource,) = build_resources(open_backend(machine), Config())  # machines that serve one resource
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    manager = ObservedPluginManager(resource, plugin_dir, timing=FAST)
    manager.start()
    kubelet.wait_for_connection(resource.resource_name, timeout_s=WAIT_S)
    return Node(plugin_dir, resource, manager, kubelet)


@pytest.fixture
def node(plugin_dir: Path) -> Iterator[Node]:
    started = start_node(plugin_dir)
    yield started
    started.manager.stop()
    started.kubelet.stop()
