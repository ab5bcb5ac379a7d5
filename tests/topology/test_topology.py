"""The topology model: pair facts per shipped machine, NVSwitch detection, the facts table, the CLI."""

from __future__ import annotations

import json

import pytest

from device_plugin.cli import main
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.types import PcieLevel
from device_plugin.topology.build import build_topology
from device_plugin.topology.facts import nvlink_per_link_gbps

PAIRS = [
    ("dgx1-v100", 0, 3, "NV2", 50.0, True),
    ("dgx1-v100", 0, 1, "NV1", 25.0, True),
    ("dgx1-v100", 0, 5, "SYS", 8.0, False),
    ("dgx-a100", 0, 7, "NVS12", 300.0, False),
    ("hgx-h100", 1, 2, "NVS18", 450.0, True),
    ("island-16gpu", 0, 7, "NVS18", 450.0, True),
    ("island-16gpu", 7, 8, "SYS", 8.0, False),
    ("pcie-8gpu-2socket", 0, 1, "PIX", 24.0, True),
    ("pcie-8gpu-2socket", 1, 2, "NODE", 12.0, True),
    ("workstation-4gpu", 0, 1, "NV4", 56.25, True),
    ("workstation-4gpu", 1, 2, "NODE", 12.0, True),
]
IDS = [
    "dgx1: double NVLink pair",
    "dgx1: single NVLink pair",
    "dgx1: unlinked pair across sockets falls back to PCIe SYS",
    "dgx-a100: NVSwitch seen, 12 links x 25 GB/s, across NPS4 NUMA nodes",
    "hgx-h100: NVSwitch seen, 18 links x 25 GB/s",
    "island-16gpu: inside an island through NVSwitch",
    "island-16gpu: between islands only PCIe across CPUs",
    "pcie: one switch",
    "pcie: two switches of one socket",
    "workstation: GA102 bridge of 4 links at ~14 GB/s",
    "workstation: host bridges of one CPU",
]


@pytest.mark.parametrize(("machine", "a", "b", "label", "gbps", "same_numa"), PAIRS, ids=IDS)
def test_pair_facts(machine: str, a: int, b: int, label: str, gbps: float, same_numa: bool) -> None:
    topology = build_topology(FakeNvml.from_machine(machine))
    pair = topology.pair(a, b)
    assert (pair.label, pair.bandwidth_gbps, pair.same_numa) == (label, gbps, same_numa)
    assert topology.pair(b, a) == pair


def test_pcie_level_is_kept_under_nvlink() -> None:
    pair = build_topology(FakeNvml.from_machine("workstation-4gpu")).pair(0, 1)
    assert pair.pcie_level is PcieLevel.HOST_BRIDGE


@pytest.mark.parametrize(
    ("model", "gbps"),
    [
        ("Tesla P100-SXM2-16GB", 20.0),
        ("Tesla V100-SXM2-32GB", 25.0),
        ("NVIDIA A100-SXM4-80GB", 25.0),
        ("NVIDIA H200", 25.0),
        ("NVIDIA GH200 480GB", 25.0),
        ("NVIDIA B200", 50.0),
        ("NVIDIA GeForce RTX 3090", 14.0625),
        ("NVIDIA L40S", None),
    ],
    ids=["P100", "V100", "A100", "H200", "GH200", "B200", "RTX 3090 bridge", "L40S has no NVLink entry"],
)
def test_nvlink_per_link_by_generation(model: str, gbps: float | None) -> None:
    assert nvlink_per_link_gbps(model) == gbps


def test_topology_command_prints_matrix_numa_and_bandwidth(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "--machine", "island-16gpu"]) == 0
    out = capsys.readouterr().out
    header, first = out.splitlines()[0:2]
    assert header.split()[-1] == "NUMA" and first.split()[0] == "GPU0"
    assert first.split()[1:3] == ["X", "NVS18"] and first.split()[-1] == "0"
    assert "Bandwidth (GB/s, one direction):" in out


def test_topology_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "--machine", "workstation-4gpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["pairs"]) == 6
    assert {"a": 0, "b": 1, "link": "NV4"}.items() <= data["pairs"][0].items()


def test_topology_command_unknown_machine_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "--machine", "no-such-machine"]) == 2
    assert "unknown machine" in capsys.readouterr().err
