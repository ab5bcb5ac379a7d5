"""A fatal recovery action on a MIG parent marks every MIG device on it, in both modes: the device plugin's
resources (migStrategy mixed) and the DRA driver's slices (a taint on each of the parent's devices). An
informational action (RECOVER_IMEX_DOMAIN) marks none. The machine is the shipped h100-mig-mixed with a
565+ driver, so the fake reports recovery actions."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.config.loader import load_config
from device_plugin.core.names import OWN_DOMAIN
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.recovery_action import RecoveryAction
from testbed.api_standin import ApiStandin
from testbed.dra_node import DRIVER, NODE, Node, eventually
from testbed.scheduler_view import taints_of
from tests.composed import build_resources

from .conftest import FAST, start, unhealthy_gpus, wait_until
from .test_recovery_action import machine_with_driver

DRIVER_VERSION = "570.124.06"
PARENT = 1  # GPU 1 of h100-mig-mixed: seven 1g.10gb MIG devices
MARKER = 5  # a whole GPU whose probe failure shows that probe rounds went by


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeNvml]:
    backend = FakeNvml.from_machine(machine_with_driver(tmp_path, DRIVER_VERSION))
    yield backend
    backend.close()


def test_device_plugin_mode_a_reset_on_the_parent_marks_all_its_mig_devices(fake: FakeNvml) -> None:
    resources = build_resources(fake, load_config(env={"MIG_STRATEGY": "mixed"}))
    mig = next(r for r in resources if r.resource_name == "nvidia.com/mig-1g.10gb")
    on_parent = {d.id for d in mig.snapshot().devices if d.gpu_indices == (PARENT,)}
    assert len(on_parent) == 7
    watcher = start(fake, resources, FAST)
    try:
        fake.test_hooks.set_recovery_action(PARENT, RecoveryAction.RECOVER_IMEX_DOMAIN)
        # informational: probe rounds pass and nothing is marked (the GPU stays in service)
        fake.test_hooks.set_probe_failure(MARKER, "marker")  # a later fault on another GPU shows rounds went by
        wait_until(mig, lambda s: unhealthy_gpus(s) == set())
        snapshot = wait_until(resources[0], lambda s: unhealthy_gpus(s) == {MARKER})
        assert snapshot is not None and unhealthy_gpus(mig.snapshot()) == set()
        fake.test_hooks.set_recovery_action(PARENT, RecoveryAction.GPU_RESET)
        marked = wait_until(mig, lambda s: unhealthy_gpus(s) == {PARENT})
        assert {d.id for d in marked.devices if not d.healthy} == on_parent
        assert watcher.states()[PARENT].recovery_action == RecoveryAction.GPU_RESET
        fake.test_hooks.recover(PARENT)
        wait_until(mig, lambda s: unhealthy_gpus(s) == set())
    finally:
        watcher.stop()


@pytest.fixture
def dra_node(fake: FakeNvml) -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))  # short: unix socket paths max 107 bytes
    api = ApiStandin().up()
    api.add_node(NODE)
    node = Node(root, api, fake)
    yield node
    node.stop()
    api.down()
    shutil.rmtree(root, ignore_errors=True)
    assert api.invalid == []


def test_dra_mode_a_reset_on_the_parent_taints_all_its_mig_devices(dra_node: Node) -> None:
    driver, fake = dra_node.start(), dra_node.fake
    assert driver.publisher.wait_synced(10.0)
    children = {d.name for d in driver.devices() if d.gpu_index == PARENT}
    assert len(children) > 1
    fake.test_hooks.set_recovery_action(PARENT, RecoveryAction.RECOVER_IMEX_DOMAIN)
    fake.test_hooks.set_probe_failure(MARKER, "marker")  # proves probe rounds ran while the parent stayed untainted
    assert eventually(lambda: any(n == f"gpu-{MARKER}" for n in taints_of(dra_node.api.pool(DRIVER, NODE))))
    assert not children & set(taints_of(dra_node.api.pool(DRIVER, NODE)))
    fake.test_hooks.set_recovery_action(PARENT, RecoveryAction.NODE_REBOOT)
    assert eventually(lambda: children <= set(taints_of(dra_node.api.pool(DRIVER, NODE))))
    taints = taints_of(dra_node.api.pool(DRIVER, NODE))
    assert {(t["key"], t["value"], t["effect"]) for name in children for t in taints[name]} == {
        (f"{OWN_DOMAIN}/unhealthy", "recovery-node-reboot", "NoSchedule")
    }
