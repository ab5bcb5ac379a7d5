"""The DRA node the driver tests start: the node runtime with the DRA front-end on fake NVML + health, the
DRA kubelet stand-in and the API stand-in (Node), the `node` fixture that builds one on a DGX-1, and a
polling `eventually`. tests/dra/conftest.py offers the fixture to every module here.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from device_plugin.config.health import HealthConfig
from device_plugin.config.loader import load_config
from device_plugin.config.model import Config
from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.api_objects import allocated_claim
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.api_standin import ApiStandin
from testbed.scheduler_view import schedulable

DRIVER, NODE = DEFAULT_DRA_DRIVER_NAME, "node-a"  # the default driver name
FAST = HealthConfig(quiet_period_s=0.2, probe_interval_s=0.02, event_wait_s=0.05, retry_initial_s=0.02, retry_max_s=0.1)


def eventually(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll until `check` holds; a bound for a loaded machine, not a timing claim (benchmarks measure)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


@dataclass
class Node:
    root: Path
    api: ApiStandin
    fake: FakeNvml
    runtime: NodeRuntime[DraFrontEnd] | None = None

    @property
    def config_file(self) -> Path:
        return self.root / "config.yaml"

    def load(self) -> Config:
        """The config file (written by the test, or absent), with the test's directory and fast health."""
        path = self.config_file if self.config_file.exists() else None
        config = load_config(config_file=path, env={"METRICS_ADDRESS": ""})
        daemon = replace(
            config.daemon, device_plugin_dir=self.root / "device-plugins", health=FAST, rescan_interval_s=3600.0
        )
        return replace(config, daemon=daemon)

    def start(self) -> DraFrontEnd:
        config = self.load()
        client = api_client(self.api.host)
        front_end = DraFrontEnd.for_config(config, client, node_name=NODE, backoff_max_s=0.2)
        self.runtime = NodeRuntime(self.fake, config, front_end, load_config=self.load, config_file=self.config_file)
        self.runtime.start()
        return front_end

    def rescan(self) -> bool:
        assert self.runtime is not None
        return self.runtime.rebuild()

    def stop(self) -> bool:
        clean = True
        if self.runtime is not None:
            clean = self.runtime.stop()
            self.runtime = None
        return clean

    def kubelet(self) -> DraKubeletStandin:
        return DraKubeletStandin(self.root / "plugins_registry")

    def published(self) -> list[str]:
        """The devices the scheduler can allocate (a tainted one is listed, but not allocatable)."""
        return schedulable(self.api.pool(DRIVER, NODE))

    def listed(self) -> list[str]:
        """Every device in the pool's slices, tainted or not."""
        return [d["name"] for s in self.api.pool(DRIVER, NODE) for d in s["spec"]["devices"]]

    def claim(self, name: str, uid: str, *devices: str) -> tuple[str, str, str]:
        results = [{"request": "gpus", "driver": DRIVER, "pool": NODE, "device": d} for d in devices]
        self.api.claims[("ns", name)] = allocated_claim("ns", name, uid, results)
        return ("ns", uid, name)

    def claim_reads(self) -> int:
        return sum(1 for m, p in self.api.requests if m == "GET" and "/resourceclaims/" in p)


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))  # short: unix socket paths max 107 bytes
    api = ApiStandin()
    api.up()
    api.add_node(NODE)
    n = Node(root, api, FakeNvml.from_machine("dgx1-v100"))
    yield n
    n.stop()
    api.down()
    shutil.rmtree(root, ignore_errors=True)
    assert api.invalid == []
