"""The whole DRA driver publishing its ResourceSlices: the node runtime with the DRA front-end on fake NVML +
health, the DRA kubelet stand-in, the API stand-in (testbed/dra_node.py).

An unhealthy GPU leaves the pool and returns on recovery, marked on the cached devices with nothing rebuilt;
pcieRoot is what `dra slices` prints; slices a kubelet restart wiped come back, and an API server down at
start is published to once it is up; a rescan publishes a MIG re-layout or a new GPU, and nothing when
nothing changed. No slice is left stale.
"""

from __future__ import annotations

from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.inventory import STANDARD, build_devices
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from testbed.dra_node import DRIVER, NODE, Node, eventually
from testbed.scheduler_view import blocked, newest_devices, taints_of


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
    # taint), and every device keeps its attributes and partition values; only the hints that follow the
    # GPUs in use change (dra/occupancy.py: the sick GPU ranks last, a free one first).
    assert node.runtime.inventory is inventory and node.runtime.inventory.allocator is inventory.allocator
    assert driver.devices() is devices and "gpu-3" in driver.unhealthy()

    def published_attributes() -> dict[str, dict[str, object]]:
        return {d["name"]: d["attributes"] for s in node.api.pool(DRIVER, NODE) for d in s["spec"]["devices"]}

    # the hints follow on the hint thread, after the taint was written
    assert eventually(lambda: published_attributes()["gpu-3"][RANK]["int"] == 7)  # type: ignore[index]
    after = published_attributes()
    assert list(taints_of(node.api.pool(DRIVER, NODE))) == ["gpu-3"]
    assert _without(after, RANK, FOUR) == _without(before, RANK, FOUR)
    ranks = {name: attrs[RANK]["int"] for name, attrs in after.items()}
    assert sorted(ranks.values()) == list(range(8)) and ranks["gpu-3"] == 7


RANK, FOUR = f"{OWN_DOMAIN}/singleGPURank", f"{OWN_DOMAIN}/rankedSet4A"


def _without(devices: dict[str, dict[str, object]], *names: str) -> dict[str, dict[str, object]]:
    return {name: {k: v for k, v in attrs.items() if k not in names} for name, attrs in devices.items()}


def test_a_rescan_that_finds_nothing_new_publishes_nothing(node: Node) -> None:
    driver = node.start()
    assert driver.publisher.wait_synced(10.0) and node.runtime is not None
    requests, generation = len(node.api.requests), driver.publisher.generation
    assert not node.rescan()
    assert driver.publisher.wait_synced(10.0)
    assert len(node.api.requests) == requests and driver.publisher.generation == generation
