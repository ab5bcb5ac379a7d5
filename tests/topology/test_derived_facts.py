"""Derived facts of the Topology per shipped machine: NVLink domains, PCIe roots, bandwidth tiers, groups."""

from __future__ import annotations

from typing import Any

import pytest

from device_plugin.nvml.fake.catalog import load_machine_description, shipped_machine_names
from device_plugin.nvml.fake.description import parse_machine_description
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.pcie_paths import is_root_bus_name
from device_plugin.topology.build import build_topology
from device_plugin.topology.model import Topology


def topology(machine: str) -> Topology:
    return build_topology(FakeNvml.from_machine(machine))


def pairs(count: int) -> tuple[tuple[int, ...], ...]:
    return tuple((2 * i, 2 * i + 1) for i in range(count // 2))


def alone(count: int) -> tuple[tuple[int, ...], ...]:
    return tuple((i,) for i in range(count))


EIGHT = (tuple(range(8)),)
# What each machine file describes, stated independently of the code:
# (NVLink domains, groups of GPUs sharing a PCIe root complex, largest all-pairs NVLinked group).
FACTS: dict[str, tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...], int]] = {
    "dgx1-v100": (EIGHT, ((0, 1, 2, 3), (4, 5, 6, 7)), 4),  # cube mesh; one host bridge per socket
    "dgx-a100": (EIGHT, pairs(8), 8),  # NVSwitch; each GPU pair on its own root complex
    "a100-mig-7x1g": (EIGHT, pairs(8), 8),
    "hgx-h100": (EIGHT, alone(8), 8),  # every GPU on its own root port
    "hgx-h200": (EIGHT, alone(8), 8),
    "h100-mig-mixed": (EIGHT, alone(8), 8),
    "island-16gpu": ((tuple(range(8)), tuple(range(8, 16))), pairs(16), 8),  # two NVSwitch islands
    "pcie-8gpu-2socket": (alone(8), pairs(8), 1),  # no NVLink; two GPUs per root port
    "pcie-8gpu-2nic": (alone(8), pairs(8), 1),
    "workstation-4gpu": (((0, 1), (2, 3)), ((0, 1), (2, 3)), 2),  # NVLink bridges; two host bridges
    "single-gpu": (((0,),), ((0,),), 1),
    # GB200 NVL72 trays: the 4 GPUs reach each other through the rack's NVLink switches; each GPU alone
    # on a root complex of its Grace.
    "gb200-nvl72-tray-a": ((tuple(range(4)),), alone(4), 4),
    "gb200-nvl72-tray-b": ((tuple(range(4)),), alone(4), 4),
    # two A100s on their own root ports, four T4s under one switch; no NVLink
    "pcie-mixed-a100-t4": (alone(6), ((0,), (1,), (2, 3, 4, 5)), 1),
}


def root_groups(t: Topology) -> tuple[tuple[int, ...], ...]:
    by_root: dict[str | None, list[int]] = {}
    for gpu in range(t.gpu_count):
        by_root.setdefault(t.pcie_root(gpu), []).append(gpu)
    return tuple(tuple(gpus) for gpus in by_root.values())


def test_the_table_covers_every_shipped_machine() -> None:
    assert sorted(FACTS) == sorted(shipped_machine_names())


@pytest.mark.parametrize("machine", sorted(FACTS), ids=sorted(FACTS))
def test_nvlink_domains_are_what_the_machine_file_describes(machine: str) -> None:
    t = topology(machine)
    domains, _, largest = FACTS[machine]
    assert t.nvlink_domains() == domains
    assert all(t.nvlink_domain(gpu) == domain for domain in domains for gpu in domain)
    assert t.largest_nvlink_group == largest


@pytest.mark.parametrize("machine", sorted(FACTS), ids=sorted(FACTS))
def test_pcie_roots_are_the_host_bridges_the_machine_file_describes(machine: str) -> None:
    t = topology(machine)
    assert root_groups(t) == FACTS[machine][1]
    assert all(is_root_bus_name(str(t.pcie_root(gpu))) for gpu in range(t.gpu_count))
    described = load_machine_description(machine).gpus
    assert all(t.pcie_path(gpu.index) == gpu.pcie for gpu in described)  # the paths the hardware layer handed up


def test_free_text_host_bridges_are_named_in_order_of_first_use() -> None:
    t = topology("dgx1-v100")
    assert [t.pcie_root(gpu) for gpu in (0, 3, 4, 7)] == ["pcifc00:00", "pcifc00:00", "pcifc00:01", "pcifc00:01"]


def machine(*paths: list[str] | None) -> dict[str, Any]:
    gpus = [{"model": "NVIDIA L40S", "memory_mib": 1024} | ({} if p is None else {"pcie": p}) for p in paths]
    return {"name": "roots", "gpus": gpus}


ROOT_CASES = {
    "a root bus name is published as written": (
        machine(["cpu0", "pci0000:00", "sw0"], ["cpu0", "pci0000:00", "sw1"]),
        ("pci0000:00", "pci0000:00"),
    ),
    "free text next to a real name takes the next free synthetic name": (
        machine(["cpu0", "pcifc00:00"], ["cpu0", "cpu0-rp1"]),
        ("pcifc00:00", "pcifc00:01"),
    ),
    "a path that is only its socket says nothing of its root": (machine(None, ["cpu0"]), (None, None)),
}


@pytest.mark.parametrize(("description", "roots"), ROOT_CASES.values(), ids=ROOT_CASES.keys())
def test_pcie_root_comes_from_the_description_tree(description: dict[str, Any], roots: tuple[str | None]) -> None:
    t = build_topology(FakeNvml(parse_machine_description(description)))
    assert tuple(t.pcie_root(gpu) for gpu in range(t.gpu_count)) == roots


def test_bandwidth_tiers_group_the_gpus_by_speed_fastest_first() -> None:
    tiers = topology("pcie-8gpu-2socket").bandwidth_tiers
    assert [tier.min_mbps for tier in tiers] == [24_000, 12_000, 8_000]  # PIX, NODE, SYS
    assert tiers[0].groups == pairs(8)  # the PCIe switches
    assert tiers[1].groups == ((0, 1, 2, 3), (4, 5, 6, 7))  # the sockets
    assert tiers[2].groups == (tuple(range(8)),)  # at the slowest speed everything is joined
    islands = topology("island-16gpu").bandwidth_tiers
    assert [(t.min_mbps, t.groups) for t in islands] == [
        (450_000, FACTS["island-16gpu"][0]),
        (8_000, (tuple(range(16)),)),
    ]


def test_derived_facts_do_not_count_in_equality() -> None:
    assert topology("hgx-h100") == topology("hgx-h100") != topology("hgx-h200")
