"""FakeNvml as a model of a machine: what it reports for the shipped machines and for small described ones."""

from __future__ import annotations

from collections import Counter

import pytest

from device_plugin.core.errors import NvmlError
from device_plugin.nvml.fake.description import parse_machine_description
from device_plugin.nvml.fake.link_description import nvswitch_bus_id
from device_plugin.nvml.fake.machine import FakeNvml, cuda_version_for_driver, pcie_level_of_paths
from device_plugin.nvml.types import PcieLevel

PIX, PXB, PHB, NODE, SYS = (
    PcieLevel.SINGLE_SWITCH,
    PcieLevel.MULTIPLE_SWITCHES,
    PcieLevel.HOST_BRIDGE,
    PcieLevel.NODE,
    PcieLevel.SYSTEM,
)

PATH_LEVELS = [
    ("same-leaf-switch", ("cpu0", "hb0", "sw0"), ("cpu0", "hb0", "sw0"), PIX),
    ("sibling-leaves-under-one-switch", ("cpu0", "hb0", "sw0", "sw0a"), ("cpu0", "hb0", "sw0", "sw0b"), PXB),
    ("leaf-under-the-others-switch", ("cpu0", "hb0", "sw0"), ("cpu0", "hb0", "sw0", "sw0b"), PXB),
    ("switches-on-one-host-bridge", ("cpu0", "hb0", "sw0"), ("cpu0", "hb0", "sw1"), PHB),
    ("same-host-bridge-no-switch", ("cpu0", "hb0"), ("cpu0", "hb0"), PHB),
    ("different-host-bridges", ("cpu0", "hb0", "sw0"), ("cpu0", "hb1", "sw1"), NODE),
    ("cpu-only-paths", ("cpu0",), ("cpu0",), NODE),
    ("different-sockets", ("cpu0", "hb0", "sw0"), ("cpu1", "hb1", "sw1"), SYS),
]


@pytest.mark.parametrize(
    ("a", "b", "level"), [(a, b, lvl) for _, a, b, lvl in PATH_LEVELS], ids=[i for i, *_ in PATH_LEVELS]
)
def test_pcie_level_of_paths(a: tuple[str, ...], b: tuple[str, ...], level: PcieLevel) -> None:
    assert pcie_level_of_paths(a, b) == level
    assert pcie_level_of_paths(b, a) == level


# (machine, gpu a, gpu b, what `nvidia-smi topo -m` would print for the PCIe part)
MACHINE_LEVELS = [
    ("dgx1-v100", 0, 1, PIX),
    ("dgx1-v100", 0, 2, PHB),
    ("dgx1-v100", 3, 4, SYS),
    ("dgx-a100", 0, 1, PXB),
    ("dgx-a100", 1, 2, NODE),
    ("dgx-a100", 3, 4, SYS),
    ("hgx-h100", 0, 3, NODE),
    ("hgx-h100", 0, 7, SYS),
    ("pcie-8gpu-2socket", 6, 7, PIX),
    ("pcie-8gpu-2socket", 1, 2, NODE),
    ("pcie-8gpu-2socket", 0, 4, SYS),
    ("workstation-4gpu", 0, 1, PHB),
    ("workstation-4gpu", 1, 2, NODE),
    ("island-16gpu", 14, 15, PIX),
    ("island-16gpu", 7, 8, SYS),
]


@pytest.mark.parametrize(
    ("machine", "a", "b", "level"),
    MACHINE_LEVELS,
    ids=[f"{m}-{a}-{b}-{lvl.short_name}" for m, a, b, lvl in MACHINE_LEVELS],
)
def test_shipped_machine_pcie_levels(machine: str, a: int, b: int, level: PcieLevel) -> None:
    assert FakeNvml.from_machine(machine).pcie_level(a, b) == level


def direct_link_counts(fake: FakeNvml, index: int) -> dict[int, int]:
    """Peer GPU index -> number of direct NVLinks, read back through the backend interface."""
    by_bus = {gpu.pci_bus_id: gpu.index for gpu in fake.gpus()}
    return dict(Counter(by_bus[link.remote_pci_bus_id] for link in fake.nvlinks(index) if not link.remote_is_nvswitch))


def test_dgx1_reports_the_hybrid_cube_mesh() -> None:
    fake = FakeNvml.from_machine("dgx1-v100")
    assert direct_link_counts(fake, 0) == {1: 1, 2: 1, 3: 2, 4: 2}
    assert direct_link_counts(fake, 7) == {3: 1, 4: 2, 5: 1, 6: 2}
    assert all(len(fake.nvlinks(i)) == 6 for i in range(8))
    assert [link.link for link in fake.nvlinks(0)] == list(range(6))


def test_workstation_bridges_link_pairs_only() -> None:
    fake = FakeNvml.from_machine("workstation-4gpu")
    assert [direct_link_counts(fake, i) for i in range(4)] == [{1: 4}, {0: 4}, {3: 4}, {2: 4}]


def switch_ids(fake: FakeNvml, index: int) -> frozenset[str]:
    links = fake.nvlinks(index)
    assert all(link.remote_is_nvswitch and link.active for link in links)
    return frozenset(link.remote_pci_bus_id for link in links)


def test_nvswitch_machine_links_every_gpu_to_the_same_switches() -> None:
    fake = FakeNvml.from_machine("dgx-a100")
    assert all(len(fake.nvlinks(i)) == 12 for i in range(8))
    assert {switch_ids(fake, i) for i in range(8)} == {frozenset(nvswitch_bus_id(0, s) for s in range(6))}


def test_two_islands_reach_disjoint_switches() -> None:
    fake = FakeNvml.from_machine("island-16gpu")
    assert len({switch_ids(fake, i) for i in range(8)}) == 1
    assert len({switch_ids(fake, i) for i in range(8, 16)}) == 1
    assert not switch_ids(fake, 0) & switch_ids(fake, 8)


def test_machine_without_nvlink_reports_no_links() -> None:
    fake = FakeNvml.from_machine("pcie-8gpu-2socket")
    assert all(fake.nvlinks(i) == () for i in range(8))


def test_gpu_info_comes_from_the_description() -> None:
    fake = FakeNvml.from_machine("hgx-h200")
    gpu = fake.gpus()[5]
    assert (gpu.index, gpu.name, gpu.memory_mib, gpu.pci_bus_id, gpu.numa_node) == (
        5,
        "NVIDIA H200",
        143771,
        "0000:ab:00.0",
        1,
    )


def test_direct_links_and_switch_links_on_one_gpu() -> None:
    desc = parse_machine_description(
        {
            "name": "mixed",
            "gpus": [{"model": "x", "memory_mib": 1}] * 3,
            "nvlinks": [[0, 2, 2]],
            "nvswitch": [{"gpus": [0, 1], "links_per_gpu": 4}],
        }
    )
    links = FakeNvml(desc).nvlinks(0)
    assert [(link.link, link.remote_is_nvswitch) for link in links] == [(i, i >= 2) for i in range(6)]
    assert links[0].remote_pci_bus_id == desc.gpus[2].pci_bus_id


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [("550.54.15", "12.4"), ("535.161.08", "12.2"), ("470.82.01", "11.4"), ("999.1", ""), ("custom", "")],
    ids=["r550", "r535", "r470", "unknown-branch", "not-a-version"],
)
def test_cuda_version_for_driver(driver: str, cuda: str) -> None:
    assert cuda_version_for_driver(driver) == cuda


@pytest.mark.parametrize("index", [-1, 8, True, "0"], ids=["negative", "past-end", "bool", "string"])
def test_bad_index_is_an_nvml_error(index: object) -> None:
    fake = FakeNvml.from_machine("dgx1-v100")
    with pytest.raises(NvmlError, match="no GPU with index") as caught:
        fake.nvlinks(index)  # type: ignore[arg-type]
    assert caught.value.code == 2


def test_pcie_level_with_itself_is_an_error() -> None:
    with pytest.raises(NvmlError, match="itself"):
        FakeNvml.from_machine("dgx1-v100").pcie_level(3, 3)


def test_closed_fake_refuses_calls_and_close_is_idempotent() -> None:
    fake = FakeNvml.from_machine("single-gpu")
    fake.close()
    fake.close()
    for call in (fake.gpus, fake.system_info, lambda: fake.nvlinks(0)):
        with pytest.raises(NvmlError, match="closed"):
            call()


@pytest.mark.parametrize("count", [0, 7], ids=["none-on-the-bus", "last-gpu-gone"])
def test_set_gpu_count_hides_the_last_gpus_until_they_come_back(count: int) -> None:
    fake = FakeNvml.from_machine("dgx1-v100")
    everything = fake.gpus()
    fake.set_gpu_count(count)
    assert fake.gpus() == everything[:count]
    with pytest.raises(NvmlError, match=f"no GPU with index 7; this machine has {count}"):
        fake.telemetry(7)
    fake.set_gpu_count(8)
    assert fake.gpus() == everything and fake.telemetry(7).index == 7


def test_set_gpu_count_refuses_more_gpus_than_described() -> None:
    with pytest.raises(ValueError, match=r"outside 0\.\.8"):
        FakeNvml.from_machine("dgx1-v100").set_gpu_count(9)
