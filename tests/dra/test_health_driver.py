"""The running DRA driver's health as the scheduler sees it: a fault taints the GPU's devices, recovery removes
the taint, and a server that keeps no taints gets the devices left out instead. In both cases the first-fit
model of the scheduler's allocator (benchmarks/dra_first_fit.py) never hands out the sick GPU.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from benchmarks.dra_first_fit import COUNT_ONLY, Alternative, first_fit
from device_plugin.core.devices import Health
from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.health.state import HealthCause, HealthTransition
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from testbed.api_standin import ApiStandin
from testbed.dra_node import DRIVER, NODE, Node, eventually
from testbed.scheduler_view import newest_devices, schedulable, taints_of
from tests.probes_held import probes_held


def started(machine: str) -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))  # short: unix socket paths max 107 bytes
    api = ApiStandin().up()
    api.add_node(NODE)
    n = Node(root, api, FakeNvml.from_machine(machine))
    yield n
    n.stop()
    api.down()
    shutil.rmtree(root, ignore_errors=True)
    assert api.invalid == []


@pytest.fixture
def node() -> Iterator[Node]:
    yield from started("dgx1-v100")


@pytest.fixture
def mig_node() -> Iterator[Node]:
    yield from started("h100-mig-mixed")


def allocatable(node: Node, driver: DraFrontEnd) -> list[tuple[int, dict[str, object]]]:
    """The first-fit model's input: the devices a claim that tolerates nothing can get, in order."""
    index = {d.name: d.gpu_index for d in driver.devices()}
    pool = node.api.pool(DRIVER, NODE)
    allowed = set(schedulable(pool))
    return [
        (index[d["name"]], {k: next(iter(v.values())) for k, v in d.get("basic", d)["attributes"].items()})
        for d in newest_devices(pool)
        if d["name"] in allowed
    ]


def never_allocated(node: Node, driver: DraFrontEnd, sick: int) -> bool:
    """Every claim size, by count and on each bestSetK, leaves `sick` out (and still places the claim)."""
    free = allocatable(node, driver)
    domain = driver.own_domain
    for size in range(1, len(free) + 1):
        for alternative in (COUNT_ONLY, Alternative(f"{domain}/bestSet2"), Alternative(f"{domain}/bestSet4")):
            chosen = first_fit(free, size, alternative)
            if chosen is not None and sick in chosen:
                return False
    return first_fit(free, len(free)) is not None


def _inject_to_the_event_watch(node: Node, event: HealthEvent) -> None:
    """`event` read by the event watch before any probe sees the GPU lost (tests/probes_held.py says why)."""
    assert node.runtime is not None and node.runtime.health is not None
    watcher = node.runtime.health
    with probes_held(node.fake):
        node.fake.test_hooks.inject(event)
        assert eventually(lambda: watcher.states()[event.gpu_index].health is Health.UNHEALTHY)


def _inject_xid_79(node: Node) -> None:
    _inject_to_the_event_watch(node, HealthEvent(3, HealthEventKind.XID, xid=79))


FAULTS = {
    "xid-79": (
        _inject_xid_79,
        "gpu.nvidia.com/xid",
        "79",
    ),
    "lost": (
        lambda node: _inject_to_the_event_watch(node, HealthEvent(3, HealthEventKind.LOST, detail="test")),
        "gpu.nvidia.com/gpu-lost",
        None,
    ),
}


@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
def test_a_fault_taints_the_gpu_the_scheduler_skips_it_and_recovery_removes_the_taint(
    node: Node, fault: tuple[Callable[[Node], None], str, str | None]
) -> None:
    inject, key, value = fault
    driver = node.start()
    assert driver.publisher.wait_synced(10.0)
    healthy = allocatable(node, driver)
    assert first_fit(healthy, 8) is not None and 3 in first_fit(healthy, 8)  # the check can fail
    inject(node)
    assert eventually(lambda: "gpu-3" in taints_of(node.api.pool(DRIVER, NODE)))
    (taint,) = taints_of(node.api.pool(DRIVER, NODE))["gpu-3"]
    assert (taint["key"], taint.get("value"), taint["effect"]) == (key, value, "NoSchedule")
    assert len(node.listed()) == 8 and "gpu-3" not in node.published() and never_allocated(node, driver, 3)
    assert driver.publisher.taints_kept
    # Settled: the taint we wrote (with its timeAdded) is what the server holds, so nothing is written again.
    assert driver.publisher.wait_synced(10.0)
    writes = sum(1 for m, _ in node.api.requests if m in ("PUT", "POST"))
    driver.publisher.resync()
    assert driver.publisher.wait_synced(10.0)
    assert sum(1 for m, _ in node.api.requests if m in ("PUT", "POST")) == writes
    generation = node.api.pool(DRIVER, NODE)[0]["spec"]["pool"]["generation"]
    node.fake.test_hooks.recover(3)
    assert eventually(lambda: taints_of(node.api.pool(DRIVER, NODE)) == {} and len(node.published()) == 8)
    assert node.api.pool(DRIVER, NODE)[0]["spec"]["pool"]["generation"] > generation


SERVERS = {
    "gate-off-drops-taints": lambda api: setattr(api, "keeps_taints", False),
    "v1beta1-only-server": lambda api: setattr(api, "versions", ("v1beta1",)),
    "refuses-taints-with-400": lambda api: setattr(api, "refuses_taints", True),
}


@pytest.mark.parametrize("server", SERVERS.values(), ids=SERVERS.keys())
def test_where_the_server_keeps_no_taints_the_gpu_leaves_the_pool_and_returns(
    node: Node, server: Callable[[ApiStandin], None]
) -> None:
    server(node.api)
    driver = node.start()
    assert driver.publisher.wait_synced(10.0) and len(node.published()) == 8
    node.fake.test_hooks.set_lost(3, "test")
    assert eventually(lambda: len(node.listed()) == 7 and "gpu-3" not in node.listed())
    assert not driver.publisher.taints_kept and never_allocated(node, driver, 3)
    node.fake.test_hooks.recover(3)
    assert eventually(lambda: len(node.listed()) == 8 and len(node.published()) == 8)


def test_a_sick_gpus_mig_devices_all_carry_its_taint(mig_node: Node) -> None:
    driver, fake = mig_node.start(), mig_node.fake
    assert driver.publisher.wait_synced(10.0)
    parent = next(g.index for g in fake.gpus() if fake.mig_devices(g.index))
    children = {d.name for d in driver.devices() if d.gpu_index == parent}
    assert len(children) > 1
    fake.test_hooks.set_lost(parent, "test")
    assert eventually(lambda: set(taints_of(mig_node.api.pool(DRIVER, NODE))) == children)
    assert not children & set(mig_node.published())


def test_the_same_fault_told_again_keeps_its_taint_and_time_and_writes_nothing(node: Node) -> None:
    """A transition repeated (a replay after a rebuild) must not restamp timeAdded nor bump the generation."""
    driver = node.start()
    _inject_xid_79(node)
    assert eventually(lambda: "gpu-3" in taints_of(node.api.pool(DRIVER, NODE)))
    assert driver.publisher.wait_synced(10.0)
    before = (taints_of(node.api.pool(DRIVER, NODE)), driver.publisher.generation)
    time.sleep(1.1)  # a restamp would now show another second
    # told again as a replay tells it: from the watcher's state (the event's Xid 79 made it Unhealthy)
    assert node.runtime is not None and node.runtime.health is not None
    state = node.runtime.health.states()[3]
    assert (state.cause, state.xid) == (HealthCause.XID, 79), state
    again = HealthTransition(3, Health.HEALTHY, state.health, state.reason, 0.0, state.xid, state.cause)
    assert driver.on_health(again) == (DRIVER,)
    assert driver.publisher.wait_synced(10.0)
    assert (taints_of(node.api.pool(DRIVER, NODE)), driver.publisher.generation) == before
