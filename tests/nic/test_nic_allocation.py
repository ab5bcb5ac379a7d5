"""Criterion 4 (GPUDirect-close NICs): named cases with stated intent, and what it must never override.

Each named case is also run on the same machine with its NICs removed, to show that the criterion is
what decides it (a case the old objective already answered would prove nothing).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from device_plugin.cli import main
from device_plugin.gpu_sets import Allocator
from device_plugin.nvml.fake.catalog import shipped_machine_names
from tests.allocation.machines import allocator_of, topology_of

ALL = None

CASES = [
    # (machine, available, must, size, with the NIC criterion, without it)
    ("pcie-8gpu-2nic", ALL, [], 2, (2, 3), (0, 1)),
    ("pcie-8gpu-2nic", [2, 3, 4, 5], [], 1, (4,), (2,)),
    ("pcie-8gpu-2nic", [0, 1, 2, 6], [], 2, (0, 1), (0, 1)),
    ("pcie-8gpu-2nic", ALL, [], 4, (2, 3, 6, 7), (0, 1, 2, 3)),
    ("pcie-8gpu-2nic", ALL, [2], 3, (2, 3, 6), (0, 1, 2)),
    ("dgx1-v100", [0, 1, 2], [0], 2, (0, 2), (0, 1)),
    ("pcie-8gpu-2socket", [0, 1, 2, 3, 6], [], 1, (6,), (6,)),
    ("pcie-8gpu-2socket", [0, 1, 2, 3, 4, 5], [], 1, (2,), (4,)),
]
IDS = [
    "2-NIC box: of several equal switch pairs, a 2-GPU pod takes the pair that has a NIC",
    "1-GPU pod leaves the NIC-close GPUs free",
    "ring bandwidth still wins over NIC closeness",
    "2-NIC box: a 4-GPU pod takes the two NIC switches, one NIC per switch pair",
    "2-NIC box: must_include 2 with 3 GPUs adds the other NIC's switch",
    "dgx1: a 2-GPU pod picks NV1 partners on distinct NICs (rail-aligned) over a shared NIC",
    "fragmentation still decides among GPUs without a close NIC",
    "2-socket box: 1-GPU pod takes a GPU without close NIC even over keeping socket 0 whole (4 before 5)",
]


def _without_nics(machine: str) -> Allocator:
    return Allocator(replace(topology_of(machine), nic_names=(), nic_levels=()))


@pytest.mark.parametrize(("machine", "available", "must", "size", "expected", "before"), CASES, ids=IDS)
def test_named_nic_case(
    machine: str,
    available: list[int] | None,
    must: list[int],
    size: int,
    expected: tuple[int, ...],
    before: tuple[int, ...],
) -> None:
    avail = list(range(8)) if available is None else available
    assert allocator_of(machine).allocate(avail, must, size) == expected
    assert _without_nics(machine).allocate(avail, must, size) == before


@pytest.mark.parametrize("machine", [m for m in shipped_machine_names() if not topology_of(m).nic_names])
def test_machines_without_nics_score_every_set_of_a_size_alike(machine: str) -> None:
    allocator = allocator_of(machine)
    n = allocator.topology.gpu_count
    scores = {allocator.score([g]).nic_rank for g in range(n)}
    if n >= 2:
        scores |= {allocator.score([0, g]).nic_rank for g in range(1, n)}
    assert scores == {0}


def test_ring_bandwidth_is_never_traded_for_nics() -> None:
    """On every machine with NICs and every available set, the chosen ring equals the NIC-blind choice's."""
    for machine in (m for m in shipped_machine_names() if topology_of(m).nic_names):
        with_nics, blind = allocator_of(machine), _without_nics(machine)
        n = with_nics.topology.gpu_count
        for mask in range(1, 1 << n):
            avail = [g for g in range(n) if mask >> g & 1]
            for size in range(2, len(avail) + 1):
                ours = with_nics.score(with_nics.allocate(avail, [], size))
                theirs = blind.score(blind.allocate(avail, [], size))
                assert (ours.ring_gbps, ours.total_gbps, ours.numa_nodes) == (
                    theirs.ring_gbps,
                    theirs.total_gbps,
                    theirs.numa_nodes,
                ), f"{machine} {avail} {size}"


EXPLAIN = [
    ([2, 3, 4], 1, (4,), (2,), "takes a GPU with a GPUDirect-close NIC, which multi-GPU pods need (criterion 4)"),
    ([0, 1, 2, 3], 2, (2, 3), (0, 1), "fewer GPUs with a GPUDirect-close NIC: 0 < 2 (criterion 4)"),
]


@pytest.mark.parametrize(
    ("available", "size", "chosen", "runner_up", "reason"),
    EXPLAIN,
    ids=["single GPU: the runner-up is NIC-close", "pair: the runner-up has no close NIC"],
)
def test_explain_names_the_nic_criterion(
    available: list[int], size: int, chosen: tuple[int, ...], runner_up: tuple[int, ...], reason: str
) -> None:
    explanation = allocator_of("pcie-8gpu-2nic").explain(available, [], size)
    assert explanation.chosen.gpus == chosen
    assert explanation.runner_up is not None and explanation.runner_up.gpus == runner_up
    assert explanation.reason == reason


def test_rail_alignment_is_explained(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["allocate", "--machine", "dgx1-v100", "--size", "2", "--available", "0,1,2", "--must-include", "0"]
    assert main([*args, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "GPUs: 0,2" in out
    assert "2 GPU(s) with a GPUDirect-close NIC (2 on distinct NICs)" in out
    assert "why it lost: fewer GPUs on distinct close NICs (less rail-aligned): 1 < 2 (criterion 4)" in out
