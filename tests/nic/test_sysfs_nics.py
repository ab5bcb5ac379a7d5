"""Real NIC discovery against fake sysfs trees that mirror real layouts (bare metal, a VM, odd devices)."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_plugin.nvml.pcie_paths import UNKNOWN_SOCKET, pcie_level_of_paths, pcie_roots
from device_plugin.nvml.sysfs_nics import SysfsNics
from device_plugin.nvml.types import PcieLevel

from .fake_sysfs import add_pci_function, add_plain_netdev, add_rdma_device

# A DGX-H100-like socket: root port 00:01.0 -> switch (up 01:00.0, downs 02:00.0 / 02:01.0) holding GPU
# 1b:00.0 and NIC 18:00.0; a second root port with a two-level switch holding GPU 43:00.0 and NIC 40:00.0.
GPU_A = ["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:1b:00.0"]
NIC_A = ["0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:18:00.0"]
GPU_B = ["0000:00:03.0", "0000:30:00.0", "0000:31:00.0", "0000:32:00.0", "0000:33:00.0", "0000:43:00.0"]
NIC_B = ["0000:00:03.0", "0000:30:00.0", "0000:31:01.0", "0000:40:00.0"]


@pytest.fixture
def bare_metal(tmp_path: Path) -> Path:
    for chain in (GPU_A, GPU_B):
        add_pci_function(tmp_path, chain)
    add_rdma_device(
        tmp_path, "mlx5_0", add_pci_function(tmp_path, NIC_A), netdev="ibp24s0", rates=("400 Gb/sec (4X NDR)",)
    )
    add_rdma_device(tmp_path, "mlx5_1", add_pci_function(tmp_path, NIC_B), netdev="ibp64s0")
    return tmp_path


def test_nics_come_with_bus_id_netdev_numa_and_rate(bare_metal: Path) -> None:
    first, second = SysfsNics(bare_metal).nics()
    assert (first.name, first.netdev, first.pci_bus_id, first.numa_node, first.link_gbit_per_s) == (
        "mlx5_0",
        "ibp24s0",
        "0000:18:00.0",
        0,
        400.0,
    )
    assert (second.name, second.link_gbit_per_s) == ("mlx5_1", None)  # no ports/*/rate: unknown


def test_pcie_path_names_switches_by_upstream_port(bare_metal: Path) -> None:
    nics = SysfsNics(bare_metal)
    assert nics.pcie_path("0000:1b:00.0") == ("cpu0", "pci0000:00", "0000:01:00.0")
    assert nics.pcie_path("00000000:43:00.0") == ("cpu0", "pci0000:00", "0000:30:00.0", "0000:32:00.0")
    assert nics.nics()[1].pcie_path == ("cpu0", "pci0000:00", "0000:30:00.0")
    assert nics.pcie_path("0000:99:00.0") is None


LEVELS = [
    ("0000:1b:00.0", 0, PcieLevel.SINGLE_SWITCH),
    ("0000:43:00.0", 1, PcieLevel.MULTIPLE_SWITCHES),
    ("0000:1b:00.0", 1, PcieLevel.HOST_BRIDGE),
]


@pytest.mark.parametrize(
    ("gpu", "nic", "level"),
    LEVELS,
    ids=["GPU and NIC on one switch: PIX", "NIC one switch level up: PXB", "different root ports: PHB"],
)
def test_gpu_nic_levels_follow_the_sysfs_tree(bare_metal: Path, gpu: str, nic: int, level: PcieLevel) -> None:
    source = SysfsNics(bare_metal)
    gpu_path = source.pcie_path(gpu)
    assert gpu_path is not None
    assert pcie_level_of_paths(gpu_path, source.nics()[nic].pcie_path) == level


def test_no_rdma_device_means_no_nics(tmp_path: Path) -> None:
    add_pci_function(tmp_path, GPU_A)
    add_plain_netdev(tmp_path, add_pci_function(tmp_path, NIC_A), "eno1")  # Ethernet without RDMA
    assert SysfsNics(tmp_path).nics() == ()
    assert SysfsNics(tmp_path).pcie_path("0000:1b:00.0") is not None  # GPU paths still work


def test_only_ethernet_nics_with_rdma_are_listed(tmp_path: Path) -> None:
    add_plain_netdev(tmp_path, add_pci_function(tmp_path, ["0000:00:1c.0", "0000:05:00.0"]), "eno1")
    roce = add_pci_function(tmp_path, NIC_A)
    add_rdma_device(tmp_path, "mlx5_0", roce, netdev="enp24s0np0", rates=("100 Gb/sec (2X HDR)",))
    assert [(n.name, n.netdev) for n in SysfsNics(tmp_path).nics()] == [("mlx5_0", "enp24s0np0")]


def test_a_nic_without_numa_node_has_none_and_an_unknown_socket(tmp_path: Path) -> None:
    add_rdma_device(tmp_path, "mlx5_0", add_pci_function(tmp_path, NIC_A, numa_node=-1))
    (nic,) = SysfsNics(tmp_path).nics()
    assert nic.numa_node is None
    assert nic.pcie_path[0] == UNKNOWN_SOCKET


def test_a_vm_with_a_hidden_pcie_tree_gets_paths_without_switches(tmp_path: Path) -> None:
    gpu = add_pci_function(tmp_path, ["0000:00:05.0"])  # passed through: right under the root bus
    add_rdma_device(tmp_path, "mlx5_0", add_pci_function(tmp_path, ["0000:00:06.0"]), rates=("200 Gb/sec",))
    source = SysfsNics(tmp_path)
    (nic,) = source.nics()
    assert gpu.name == "0000:00:05.0"
    assert source.pcie_path("0000:00:05.0") == nic.pcie_path == ("cpu0", "pci0000:00")
    assert pcie_level_of_paths(("cpu0", "pci0000:00"), nic.pcie_path) == PcieLevel.HOST_BRIDGE


def test_software_rdma_devices_and_odd_entries_are_skipped(tmp_path: Path) -> None:
    add_rdma_device(tmp_path, "rxe0", None)  # soft-RoCE: no PCI parent
    add_rdma_device(tmp_path, "mlx5_10", add_pci_function(tmp_path, ["0000:00:02.0", "0000:0a:00.0"]))
    add_rdma_device(tmp_path, "mlx5_2", add_pci_function(tmp_path, ["0000:00:02.0", "0000:0b:00.0"]))
    assert [n.name for n in SysfsNics(tmp_path).nics()] == ["mlx5_2", "mlx5_10"]


def test_the_fastest_port_sets_the_rate(tmp_path: Path) -> None:
    function = add_pci_function(tmp_path, NIC_A)
    add_rdma_device(tmp_path, "mlx5_0", function, rates=("100 Gb/sec (4X EDR)", "200 Gb/sec (4X HDR)", "garbage"))
    assert SysfsNics(tmp_path).nics()[0].link_gbit_per_s == 200.0


def test_a_second_root_bus_is_its_own_host_bridge(tmp_path: Path) -> None:
    add_pci_function(tmp_path, ["0000:80:01.0", "0000:81:00.0"], root_bus="pci0000:80", numa_node=1)
    add_rdma_device(tmp_path, "mlx5_0", add_pci_function(tmp_path, ["0000:00:01.0", "0000:05:00.0"]))
    gpu_path = SysfsNics(tmp_path).pcie_path("0000:81:00.0")
    assert gpu_path == ("cpu1", "pci0000:80")
    assert pcie_level_of_paths(gpu_path, SysfsNics(tmp_path).nics()[0].pcie_path) == PcieLevel.SYSTEM


ROOT_CASES = {
    # chain below the root bus, root bus, the path's host bridge (hence the GPU's pcieRoot)
    "a GPU under a second root bus": (["0000:80:01.0", "0000:81:00.0"], "pci0000:80", "pci0000:80"),
    # Intel VMD: a nested PCI domain behind an endpoint of the first root bus; Kubernetes names the first.
    "a GPU behind a VMD domain has the outer root bus": (
        ["0000:00:0e.0", "pci10000:00", "10000:00:02.0", "10000:01:00.0", "10000:02:00.0", "10000:03:00.0"],
        "pci0000:00",
        "pci0000:00",
    ),
}


@pytest.mark.parametrize(("chain", "root_bus", "root"), ROOT_CASES.values(), ids=ROOT_CASES.keys())
def test_the_pcie_root_is_the_first_root_bus_of_the_sysfs_path(
    tmp_path: Path, chain: list[str], root_bus: str, root: str
) -> None:
    add_pci_function(tmp_path, chain, root_bus=root_bus)
    path = SysfsNics(tmp_path).pcie_path(chain[-1])
    assert path is not None and path[1] == root
    assert pcie_roots([path]) == (root,)  # a real root bus name is kept as it is


def test_switches_behind_a_vmd_domain_are_those_below_its_root_bus(tmp_path: Path) -> None:
    chain = ["0000:00:0e.0", "pci10000:00", "10000:00:02.0", "10000:01:00.0", "10000:02:00.0", "10000:03:00.0"]
    add_pci_function(tmp_path, chain)
    assert SysfsNics(tmp_path).pcie_path(chain[-1]) == ("cpu0", "pci0000:00", "10000:01:00.0")
