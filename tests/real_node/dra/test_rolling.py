"""Two instances of our DRA driver on the real kubelet (socketNames: per-instance, a DaemonSet surge)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from testbed.realnode.cluster import RealCluster
from testbed.realnode.our_daemon import OurDaemon
from testbed.realnode.pods import busybox_pod, delete_and_wait, run_to_end, start_running
from testbed.realnode.slice_writes import SliceWrites
from tests.real_node.dra.conftest import DRIVER, EXAMPLES, devices, kubelet_dir, slices

MACHINE = "dgx1-v100"


@pytest.fixture
def writes(deployed: RealCluster) -> Iterator[SliceWrites]:
    assert deployed.control_plane is not None
    watch = SliceWrites(deployed.binaries.kubectl, deployed.control_plane.admin_kubeconfig, DRIVER)
    yield watch
    watch.stop()


def test_per_instance_sockets_fit_under_this_kubelets_long_root(
    deployed: RealCluster, dra_driver: Callable[..., OurDaemon]
) -> None:
    """The root here is longer than /var/lib/kubelet; `<root>/plugins_registry/<driver>-<UID>-reg.sock` would
    not fit 108 bytes (the driver exited 2 before): the UID's digest stands in for it."""
    root = kubelet_dir(deployed)
    assert len(str(root)) > 19
    driver = dra_driver("--machine", MACHINE, per_instance=True)
    sockets = sorted(p.name for p in (root / "plugins_registry").iterdir())
    assert any(name.startswith(f"{DRIVER}-") and name.endswith("-reg.sock") for name in sockets), sockets
    assert "registered with the kubelet" in driver.log()


def test_two_instances_write_the_pool_once_per_claim_change_and_never_while_idle(
    deployed: RealCluster, dra_driver: Callable[..., OurDaemon], writes: SliceWrites
) -> None:
    """Only the newest registered instance publishes; it catches up with the other's changes. Before, the two
    rewrote the pool over each other, 120 to 250 writes per claim change."""
    old = dra_driver("--machine", MACHINE, per_instance=True)
    new = dra_driver("--machine", MACHINE, per_instance=True)
    deployed.kubectl.wait_for(
        "the newest instance publishing", lambda: "this instance publishes it now" in new.log(), 20
    )
    writes.start()
    writes.settle(quiet_s=2.0)
    idle = writes.count()
    writes.settle(quiet_s=5.0, timeout_s=6.0)
    assert writes.count() == idle == 0, writes.events
    per_change = []
    for number in range(2):
        mark = writes.count()
        start_running(deployed, busybox_pod(f"churn-{number}", EXAMPLES, "sleep 3600", claims={"gpu": "one-gpu"}))
        writes.settle()
        per_change.append(len(writes.since(mark)))
        mark = writes.count()
        released = new.log().count(" released in ")
        delete_and_wait(deployed, EXAMPLES, f"churn-{number}")
        deployed.kubectl.wait_for(
            "the kubelet's unprepare", lambda r=released: new.log().count(" released in ") > r, 30
        )
        writes.settle()
        per_change.append(len(writes.since(mark)))
    assert max(per_change) <= 1, (per_change, writes.events)
    assert sum(per_change) >= 2  # the one-GPU ranks do move: the hints are republished, once each
    assert "this instance publishes it now" not in old.log().split("leaving it to that one")[-1]  # stood aside
    generations = [e.generation for e in writes.events]
    assert generations == sorted(generations)  # never backwards


def test_a_surge_keeps_the_pool_and_the_prepared_claims_while_the_old_instance_leaves(
    deployed: RealCluster, dra_driver: Callable[..., OurDaemon], writes: SliceWrites
) -> None:
    old = dra_driver("--machine", MACHINE, per_instance=True)
    start_running(deployed, busybox_pod("before", EXAMPLES, "sleep 3600", claims={"gpus": "two-gpus-best-effort"}))
    new = dra_driver("--machine", MACHINE, per_instance=True)
    writes.start()
    assert old.stop() == 0
    assert not [e for e in writes.events if e.kind == "DELETED"], writes.events  # the pool stays
    assert len(devices(deployed)) == 8 and slices(deployed)
    done, _ = run_to_end(deployed, busybox_pod("during", EXAMPLES, "true", claims={"gpus": "two-gpus-best-effort"}))
    assert done["status"]["phase"] == "Succeeded", done["status"]
    delete_and_wait(deployed, EXAMPLES, "before")  # its Unprepare now goes to the new instance
    deployed.kubectl.wait_for(
        "the new instance releasing the old one's claim",
        lambda: any("before" in line and "released" in line for line in new.log().splitlines()),
        30,
    )
    assert json.loads(json.dumps(devices(deployed)))  # still published
