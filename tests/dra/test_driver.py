"""The whole DRA driver: the node runtime with the DRA front-end on fake NVML + health, the DRA kubelet
stand-in, the API stand-in; faults, restarts, rescans and config reloads.

In every case: nothing is prepared twice, no slice is left stale, and errors are clear.
"""

from __future__ import annotations

import logging
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
from device_plugin.dra.inventory import STANDARD, build_devices
from device_plugin.dra.kube import api_client
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from device_plugin.topology.build import build_topology
from tests.dra.api_standin import ApiStandin
from tests.dra.kubelet_dra_standin import DraKubeletStandin
from tests.dra.scheduler_view import blocked, newest_devices, schedulable, taints_of

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
        self.api.claims[("ns", name)] = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"namespace": "ns", "name": name, "uid": uid},
            "status": {"allocation": {"devices": {"results": results}}},
        }
        return ("ns", uid, name)

    def claim_reads(self) -> int:
        return sum(1 for m, p in self.api.requests if m == "GET" and "/resourceclaims/" in p)


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))  # short: unix socket paths max 107 bytes
    api = ApiStandin().up()
    api.add_node(NODE)
    n = Node(root, api, FakeNvml.from_machine("dgx1-v100"))
    yield n
    n.stop()
    api.down()
    shutil.rmtree(root, ignore_errors=True)
    assert api.invalid == []


def test_start_publishes_the_pool_registers_and_prepares_a_claim_read_from_the_api(node: Node) -> None:
    driver = node.start()
    assert driver.publisher.wait_synced(10.0) and len(node.published()) == 8
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    claim = node.claim("train", "uid-1", "gpu-0", "gpu-1")
    answer = kubelet.prepare(plugin, [claim])["uid-1"]
    assert answer.error == "" and [d.device_name for d in answer.devices] == ["gpu-0", "gpu-1"]
    # idempotent: the same answer, after a read that shows the allocation unchanged
    assert kubelet.prepare(plugin, [claim])["uid-1"] == answer and node.claim_reads() == 2


def test_an_unhealthy_gpu_leaves_the_pool_and_returns_on_recovery(node: Node) -> None:
    driver = node.start()
    assert driver.publisher.wait_synced(10.0)
    node.fake.test_hooks.set_lost(3, "test")
    assert eventually(lambda: "gpu-3" not in node.published() and len(node.published()) == 7)
    generation = node.api.pool(DRIVER, NODE)[0]["spec"]["pool"]["generation"]
    node.fake.test_hooks.recover(3)
    assert eventually(lambda: len(node.published()) == 8)
    assert node.api.pool(DRIVER, NODE)[0]["spec"]["pool"]["generation"] > generation


def test_the_running_driver_publishes_pcie_root_as_dra_slices_prints_it(node: Node) -> None:
    """`run --mode dra` and `dra slices` take pcieRoot from the same Topology, also after a fault."""

    def roots() -> dict[str, str | None]:
        devices = [d for d in newest_devices(node.api.pool(DRIVER, NODE)) if not blocked(d)]  # allocatable ones
        return {d["name"]: d["attributes"].get("resource.kubernetes.io/pcieRoot", {}).get("string") for d in devices}

    fresh = FakeNvml.from_machine("dgx1-v100")
    printed = {
        d.name: dict((a[0], a[2]) for a in d.attributes)[STANDARD + "pcieRoot"]
        for d in build_devices(fresh, build_topology(fresh))[0]
    }
    driver = node.start()
    assert driver.publisher.wait_synced(10.0) and roots() == printed
    assert len(set(printed.values())) == 2  # the DGX-1's two host bridges, one per socket
    node.fake.test_hooks.set_lost(3, "test")
    assert eventually(lambda: len(roots()) == 7)
    assert roots() == {name: root for name, root in printed.items() if name != "gpu-3"}


def test_a_claim_on_a_gpu_that_turned_unhealthy_gets_an_error_naming_it(node: Node) -> None:
    driver = node.start()
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    node.fake.test_hooks.set_lost(5, "test")
    assert eventually(lambda: "gpu-5" in driver.unhealthy())
    error = kubelet.prepare(plugin, [node.claim("c", "uid-5", "gpu-5")])["uid-5"].error
    assert "device gpu-5 is unhealthy" in error and "ns/c" in error


def test_a_claim_deleted_between_the_kubelets_call_and_our_read_is_a_clear_per_claim_error(node: Node) -> None:
    node.start()
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    gone = node.claim("gone", "uid-g", "gpu-0")
    ok = node.claim("ok", "uid-ok", "gpu-1")
    del node.api.claims[("ns", "gone")]
    answers = kubelet.prepare(plugin, [gone, ok])
    assert "ns/gone (uid-g): the ResourceClaim does not exist" in answers["uid-g"].error
    assert answers["uid-ok"].error == "" and answers["uid-ok"].devices


def test_a_plugin_restart_keeps_prepared_claims_without_preparing_them_twice(node: Node) -> None:
    node.start()
    kubelet = node.kubelet()
    claim = node.claim("c", "uid-1", "gpu-2")
    before = kubelet.prepare(kubelet.wait_for_plugin(), [claim])["uid-1"]
    node.stop()
    assert node.api.pool(DRIVER, NODE) == []  # clean shutdown: no stale slice
    driver = node.start()
    plugin = node.kubelet().wait_for_plugin()
    assert kubelet.prepare(plugin, [claim])["uid-1"] == before and node.claim_reads() == 2
    assert driver.publisher.wait_synced(10.0) and len(node.published()) == 8
    assert kubelet.unprepare(plugin, [claim]) == {"uid-1": ""}


def test_a_kubelet_restart_that_wiped_the_slices_gets_them_back_on_registration(node: Node) -> None:
    driver = node.start()
    node.kubelet().wait_for_plugin()
    assert driver.publisher.wait_synced(10.0)
    node.api.slices.clear()  # the kubelet wipes the node's slices when it starts
    node.kubelet().wait_for_plugin()  # and registers the plugins it finds again
    assert eventually(lambda: len(node.published()) == 8)


def test_the_api_server_down_at_start_publishes_once_it_is_up(node: Node) -> None:
    node.api.down()
    driver = node.start()
    assert eventually(lambda: driver.publisher.error != "") and not driver.publisher.wait_synced(0.0)
    node.api.up()
    assert driver.publisher.wait_synced(10.0) and len(node.published()) == 8


def test_a_mig_relayout_is_republished_at_the_next_rescan(node: Node) -> None:
    node.fake = FakeNvml.from_machine("h100-mig-mixed")
    driver = node.start()
    assert driver.publisher.wait_synced(10.0)
    before = node.published()
    parent = next(g.index for g in node.fake.gpus() if node.fake.mig_devices(g.index))
    node.fake.set_mig_layout(parent, [{"profile": "7g.80gb", "count": 1}])
    assert node.rescan() and driver.publisher.wait_synced(10.0)
    after = node.published()
    assert after != before and [n for n in after if n.startswith(f"gpu-{node.fake.device_minor(parent)}-mig-")]
    assert not node.rescan()  # nothing changed: nothing republished


def test_metrics_in_dra_mode_show_gpu_gauges_and_count_each_health_transition_once(node: Node) -> None:
    node.start()
    assert node.runtime is not None
    registry = node.runtime.registry
    gpu3 = next(g for g in node.fake.gpus() if g.index == 3)
    gauge = registry.get_sample_value(
        "gpu_device_plugin_gpu_memory_total_bytes", {"gpu": "3", "uuid": gpu3.uuid, "model": gpu3.name}
    )
    assert gauge == gpu3.memory_mib * 1024 * 1024
    # Xid 94 (contained ECC error) leaves no sticky state a probe could see first: the event decides.
    node.fake.test_hooks.inject(HealthEvent(3, HealthEventKind.XID, xid=94))
    labels = {"resource": DRIVER, "from_health": "Healthy", "to_health": "Unhealthy", "reason": "xid", "xid": "94"}
    assert eventually(lambda: registry.get_sample_value("gpu_device_plugin_health_transitions_total", labels) == 1)
    # No device-plugin resources in this mode: no inventory series.
    assert "gpu_device_plugin_devices" not in {family.name for family in registry.collect()}


def test_a_gpu_a_rescan_finds_is_published_health_watched_and_measured(node: Node) -> None:
    node.fake.set_gpu_count(7)
    driver = node.start()
    assert driver.publisher.wait_synced(10.0) and len(node.published()) == 7
    node.fake.set_gpu_count(8)
    assert node.rescan()
    assert node.runtime is not None and len(node.runtime.inventory.gpus) == 8
    assert eventually(lambda: len(node.published()) == 8)
    node.fake.test_hooks.set_lost(7, "test")  # the new GPU is watched: its fault takes it out of the pool
    assert eventually(lambda: len(node.published()) == 7)


def test_a_health_transition_marks_the_cached_devices_and_rebuilds_nothing(node: Node) -> None:
    driver = node.start()
    assert driver.publisher.wait_synced(10.0) and node.runtime is not None
    inventory, devices = node.runtime.inventory, driver.devices()
    before = {d["name"]: d["attributes"] for s in node.api.pool(DRIVER, NODE) for d in s["spec"]["devices"]}
    node.fake.test_hooks.set_lost(3, "test")
    assert eventually(lambda: "gpu-3" not in node.published())
    # The same inventory (and Allocator) and the same device list: only the unhealthy GPU is marked (a
    # taint), and every device keeps its attributes and partition values.
    assert node.runtime.inventory is inventory and node.runtime.inventory.allocator is inventory.allocator
    assert driver.devices() is devices and "gpu-3" in driver.device_uuids() and "gpu-3" in driver.unhealthy()
    after = {d["name"]: d["attributes"] for s in node.api.pool(DRIVER, NODE) for d in s["spec"]["devices"]}
    assert after == before and list(taints_of(node.api.pool(DRIVER, NODE))) == ["gpu-3"]


def test_a_rescan_that_finds_nothing_new_publishes_nothing(node: Node) -> None:
    driver = node.start()
    assert driver.publisher.wait_synced(10.0) and node.runtime is not None
    requests, generation = len(node.api.requests), driver.publisher.generation
    assert not node.rescan()
    assert driver.publisher.wait_synced(10.0)
    assert len(node.api.requests) == requests and driver.publisher.generation == generation


def labels_of(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


RUNNING = "version: v1\ngpuDevicePlugin:\n  mode: dra\n"
RELOADS = [
    # (edit of the file, what the log says, what the running config holds after)
    ("labelsFile: {labels}", "labels file now", lambda c, labels: c.daemon.labels_file == str(labels)),
    (
        "mode: device-plugin",
        "gpuDevicePlugin.mode changed; it takes effect when the plugin restarts",
        lambda c, labels: c.daemon.mode == "dra",
    ),
    (
        "driverName: gpu.example.com",
        "gpuDevicePlugin.driverName changed; it takes effect when the plugin restarts",
        lambda c, labels: c.daemon.driver_name == DRIVER,
    ),
    (
        "rescanIntervalSeconds: -1",
        "config file changed but is invalid, keeping the running config: gpuDevicePlugin.rescanIntervalSeconds",
        lambda c, labels: c.daemon.rescan_interval_s == 3600.0,
    ),
]


@pytest.mark.parametrize(
    ("edit", "logged", "holds"),
    RELOADS,
    ids=["labels-file-applies-at-once", "mode-needs-a-restart", "driver-name-needs-a-restart", "invalid-is-refused"],
)
def test_a_config_file_edit_reaches_dra_mode(
    node: Node,
    caplog: pytest.LogCaptureFixture,
    edit: str,
    logged: str,
    holds: Callable[[Config, Path], bool],
) -> None:
    node.config_file.write_text(RUNNING)
    driver = node.start()
    assert driver.publisher.wait_synced(10.0) and node.runtime is not None
    labels = node.root / "features.d" / "gpu"
    labels.parent.mkdir()
    kept = "" if edit.startswith("mode:") else "  mode: dra\n"  # a key appears once
    node.config_file.write_text(f"version: v1\ngpuDevicePlugin:\n{kept}  {edit.format(labels=labels)}\n")
    with caplog.at_level(logging.INFO, logger="device_plugin"):
        assert not node.rescan()  # nothing published changed
    assert logged in caplog.text
    assert "applied" not in caplog.text
    assert holds(node.runtime.config, labels)
    assert labels.exists() == ("labelsFile" in edit)
    if labels.exists():
        assert labels_of(labels)["nvidia.com/gpu.count"] == "8"
    assert len(node.published()) == 8
