"""The node's NVLink clique by NVIDIA feature discovery's rule, and each GPU's clique on the Topology."""

from __future__ import annotations

import pytest

from device_plugin.nvml.fabric_types import NO_FABRIC, FabricInfo, FabricState
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from device_plugin.topology.fabric import node_clique

RACK_A = "4b1d7c2e-93a0-4f6e-8d25-0c6e9f2a7b13"
RACK_B = "9e0a6b51-2c7d-4f18-b3e4-5a6c7d8e9f01"


def done(cluster: str = RACK_A, clique: int = 1, status: int = 0) -> FabricInfo:
    return FabricInfo(FabricState.COMPLETED, cluster, clique, status)


IN_PROGRESS = FabricInfo(FabricState.IN_PROGRESS)


@pytest.mark.parametrize(
    ("fabric", "clique", "problems"),
    [
        ([done()] * 4, f"{RACK_A}.1", 0),
        ([done(clique=32766)] * 2, f"{RACK_A}.32766", 0),
        ([NO_FABRIC] * 8, None, 0),
        ([], None, 0),
        ([done(), done(), IN_PROGRESS, done()], f"{RACK_A}.1", 1),
        ([IN_PROGRESS] * 4, None, 4),
        ([done(), done(status=6)], f"{RACK_A}.1", 1),
        ([done(), done(clique=2)], None, 1),
        ([done(), done(cluster=RACK_B)], None, 1),
        ([done(), NO_FABRIC], f"{RACK_A}.1", 0),
    ],
    ids=[
        "all-completed-one-clique",
        "clique-id-is-decimal",
        "no-fabric-no-label-no-noise",
        "no-gpus",
        "one-in-progress-counts-out-but-the-rest-agree",
        "none-completed-yet",
        "failed-registration-counts-out",
        "two-cliques-no-label",
        "two-fabrics-no-label",
        "a-gpu-without-fabric-is-ignored",
    ],
)
def test_node_clique_follows_feature_discovery(fabric: list[FabricInfo], clique: str | None, problems: int) -> None:
    decided = node_clique(fabric)
    assert decided.clique == clique
    assert len(decided.problems) == problems


def test_a_disagreement_names_the_gpus_on_each_side() -> None:
    decided = node_clique([done(), done(clique=2), done(clique=2)])
    assert decided.problems == ("the GPUs are in different cliques 1 (GPUs 0); 2 (GPUs 1, 2): no clique",)


def test_a_gpu_out_of_the_clique_is_named_with_its_state() -> None:
    decided = node_clique([done(), IN_PROGRESS])
    assert decided.problems == ("GPU 1: fabric registration in_progress, so it is in no clique",)


@pytest.mark.parametrize(
    ("machine", "cliques"),
    [
        ("gb200-nvl72-tray-a", [f"{RACK_A}.1"] * 4),
        ("gb200-nvl72-tray-b", [f"{RACK_A}.2"] * 4),
        ("hgx-h100", [None] * 8),
    ],
    ids=str,
)
def test_topology_reads_each_gpus_clique_from_the_backend(machine: str, cliques: list[str | None]) -> None:
    topology = build_topology(FakeNvml.from_machine(machine))
    assert [topology.gpu_clique(gpu) for gpu in range(topology.gpu_count)] == cliques
