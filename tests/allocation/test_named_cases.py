"""Named allocation cases on shipped machines: each id states the intent it protects."""

from __future__ import annotations

import pytest

from tests.allocation.machines import allocator_of

ALL = None  # every GPU of the machine is available

CASES = [
    # (machine, available, must_include, size, expected)
    ("dgx1-v100", ALL, [], 4, (0, 1, 2, 3)),
    ("dgx1-v100", ALL, [], 2, (0, 3)),
    ("dgx1-v100", [0, 1, 2, 3, 5], [], 1, (5,)),
    ("dgx1-v100", ALL, [6], 4, (4, 5, 6, 7)),
    ("pcie-8gpu-2socket", ALL, [], 4, (0, 1, 2, 3)),
    ("pcie-8gpu-2socket", [0, 1, 2, 4, 5, 6, 7], [], 4, (4, 5, 6, 7)),
    ("pcie-8gpu-2socket", ALL, [5], 2, (4, 5)),
    ("pcie-8gpu-2socket", [2, 3, 4, 5, 7], [], 1, (7,)),
    ("pcie-8gpu-2socket", [0, 2, 4, 5], [], 2, (4, 5)),
    ("workstation-4gpu", [0, 1, 2], [], 1, (2,)),
    ("workstation-4gpu", ALL, [], 2, (0, 1)),
    ("workstation-4gpu", [1, 2, 3], [], 2, (2, 3)),
    ("hgx-h100", ALL, [], 4, (0, 1, 2, 3)),
    ("hgx-h200", [1, 3, 5, 6, 7], [], 4, (1, 3, 5, 6)),
    ("dgx-a100", ALL, [], 4, (0, 1, 2, 3)),
    ("dgx-a100", [1, 2, 3, 4, 5, 6, 7], [], 2, (2, 3)),
    ("island-16gpu", ALL, [], 8, (0, 1, 2, 3, 4, 5, 6, 7)),
    ("island-16gpu", [g for g in range(16) if g != 3], [], 8, (8, 9, 10, 11, 12, 13, 14, 15)),
    ("island-16gpu", list(range(3, 16)), [], 2, (3, 4)),
    ("island-16gpu", list(range(3, 16)), [], 5, (3, 4, 5, 6, 7)),
    ("island-16gpu", list(range(1, 16)), [], 1, (1,)),
    ("island-16gpu", ALL, [9], 4, (8, 9, 10, 11)),
    ("single-gpu", ALL, [], 1, (0,)),
]
IDS = [
    "dgx1: 4 of 8 gives a fully NVLinked quad",
    "dgx1: 2 of 8 gives a double-NVLink pair",
    "dgx1: 1 GPU takes the lone 5 and keeps the quad 0-3 whole",
    "dgx1: must_include 6 gets its own fully NVLinked quad",
    "pcie-8gpu-2socket: 4 stay on one socket, in switch pairs",
    "pcie-8gpu-2socket: 4 with socket 0 broken take the intact socket 1",
    "pcie-8gpu-2socket: must_include 5 gets its switch partner 4",
    "pcie-8gpu-2socket: 1 GPU takes the partnerless 7, keeping two switch pairs",
    "pcie-8gpu-2socket: 2 take a switch pair over a same-socket or cross-socket pair",
    "workstation: 1 GPU with {0,1,2} free gives 2, keeping the 0-1 bridge",
    "workstation: 2 of 4 gives a bridged pair",
    "workstation: 2 with GPU 0 busy takes the intact 2-3 bridge",
    "nvswitch: any 4 are equal, so the lowest indices",
    "nvswitch h200: any 4 of the free ones are equal, so the lowest free indices",
    "dgx-a100 NPS4: 4 span the fewest NUMA nodes, lowest first",
    "dgx-a100 NPS4: 2 stay on one NUMA node, away from the broken pair 0-1",
    "island-16gpu: 8 of 16 gives one whole NVSwitch island",
    "island-16gpu: 8 with island 0 broken gives the intact island 1",
    "island-16gpu: 2 come from the broken island, keeping island 1 whole",
    "island-16gpu: 5 come from the broken island, keeping island 1 whole",
    "island-16gpu: 1 GPU comes from the broken island",
    "island-16gpu: must_include 9 stays inside island 1",
    "single-gpu: the only GPU",
]


@pytest.mark.parametrize(("machine", "available", "must", "size", "expected"), CASES, ids=IDS)
def test_named_case(
    machine: str, available: list[int] | None, must: list[int], size: int, expected: tuple[int, ...]
) -> None:
    allocator = allocator_of(machine)
    avail = list(range(allocator.topology.gpu_count)) if available is None else available
    assert allocator.allocate(avail, must, size) == expected


def test_explain_names_the_runner_up_and_why_it_lost() -> None:
    explanation = allocator_of("workstation-4gpu").explain([0, 1, 2], [], 1)
    assert explanation.chosen.gpus == (2,)
    assert explanation.runner_up is not None and explanation.runner_up.gpus == (0,)
    assert "criterion 5" in explanation.reason


def test_decision_reports_ring_and_empty_node_best() -> None:
    allocator = allocator_of("island-16gpu")
    decision = allocator.describe(allocator.allocate([0, 1, 2, 8, 9], [], 4), 5)
    assert decision.chosen == (0, 1, 2, 8)
    assert decision.ring_bandwidth_gbps == 8.0
    assert decision.best_possible_gbps == 450.0
    assert not decision.optimal
    assert decision.exact
