"""The example claims as the real scheduler places them and the real kubelet prepares and unprepares them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from device_plugin.gpu_sets import Allocator
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from testbed.placement_quality import optimal
from testbed.realnode.cluster import RealCluster
from testbed.realnode.our_daemon import OurDaemon
from testbed.realnode.pods import busybox_pod, delete_and_wait, start_running
from tests.real_node.dra.conftest import EXAMPLES, allocated, claim_of, devices, kubelet_dir

MACHINE = "dgx1-v100"
TEMPLATES = [
    pytest.param("one-gpu", 1, id="one-gpu"),
    pytest.param("two-gpus-best-effort", 2, id="two-gpus-best-effort"),
    pytest.param("four-gpus-best-effort", 4, id="four-gpus-best-effort"),
    pytest.param("four-best-connected-gpus", 4, id="four-best-connected-gpus"),
    pytest.param("eight-gpus-best-effort", 8, id="eight-gpus-best-effort"),
]


def gpu_indices(cluster: RealCluster, names: list[str]) -> set[int]:
    """The NVML indices of published devices, by their uuid attribute."""
    fake = FakeNvml.from_machine(MACHINE)
    by_uuid = {g.uuid: g.index for g in fake.gpus()}
    published = devices(cluster)
    return {by_uuid[published[n]["attributes"]["uuid"]["string"]] for n in names}


def kubelet_claims(cluster: RealCluster) -> str:
    """The real kubelet's own record of prepared claims (its DRA manager's checkpoint), as text."""
    state = kubelet_dir(cluster) / "dra_manager_state"
    return state.read_text() if state.exists() else ""


@pytest.mark.parametrize(("template", "size"), TEMPLATES)
def test_each_example_claim_is_placed_optimally_prepared_and_unprepared(
    deployed: RealCluster, dra_driver: Callable[..., OurDaemon], template: str, size: int
) -> None:
    driver = dra_driver("--machine", MACHINE)
    pod = start_running(deployed, busybox_pod("claimer", EXAMPLES, "sleep 3600", claims={"gpus": template}))
    claim = claim_of(deployed, pod["metadata"]["name"])
    got = allocated(claim)
    assert len(got) == size
    allocator = Allocator(build_topology(FakeNvml.from_machine(MACHINE)))
    assert optimal(allocator, range(8), gpu_indices(deployed, got)), got
    uid = claim["metadata"]["uid"]
    assert uid in kubelet_claims(deployed)  # the kubelet holds it as prepared by us
    prepared = [line for line in driver.log().splitlines() if "INFO" in line and "NodePrepareResources:" in line]
    assert any(claim["metadata"]["name"] in line and all(d in line for d in got) for line in prepared), prepared
    delete_and_wait(deployed, EXAMPLES, "claimer")
    deployed.kubectl.wait_for("the kubelet's unprepare", lambda: uid not in kubelet_claims(deployed), 30)
    released = [line for line in driver.log().splitlines() if "NodeUnprepareResources:" in line]
    assert any(claim["metadata"]["name"] in line and "released" in line for line in released), released


def test_a_second_claim_gets_a_set_optimal_among_the_gpus_still_free(
    deployed: RealCluster, dra_driver: Callable[..., OurDaemon]
) -> None:
    """Placement hints follow the GPUs in use: after the first claim the driver republishes, and the real
    scheduler's first fit then takes the best set left."""
    dra_driver("--machine", MACHINE)
    allocator = Allocator(build_topology(FakeNvml.from_machine(MACHINE)))
    held: set[int] = set()
    for number, (template, size) in enumerate(
        [("one-gpu", 1), ("two-gpus-best-effort", 2), ("four-gpus-best-effort", 4)]
    ):
        before = _generation(deployed)
        name = f"held-{number}"
        start_running(deployed, busybox_pod(name, EXAMPLES, "sleep 3600", claims={"gpus": template}))
        got = gpu_indices(deployed, allocated(claim_of(deployed, name)))
        assert len(got) == size and not got & held
        assert optimal(allocator, set(range(8)) - held, got), (template, got, held)
        held |= got
        deployed.kubectl.wait_for("the hints republished", lambda b=before: _generation(deployed) > b, 20)


def _generation(cluster: RealCluster) -> int:
    found: list[dict[str, Any]] = cluster.kubectl.items("resourceslices")
    return max(
        (s["spec"]["pool"]["generation"] for s in found if s["spec"]["nodeName"] == cluster.node_name), default=0
    )
