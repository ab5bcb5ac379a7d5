"""The `nics:` list of a machine description: defaults, and an error naming the field for every bad input."""

from __future__ import annotations

from typing import Any

import pytest

from device_plugin.core.errors import MachineDescriptionError
from device_plugin.nvml.fake.catalog import load_machine_description
from device_plugin.nvml.fake.description import parse_machine_description
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.fake.nic_description import default_nic_bus_id


def machine(*nics: dict[str, Any]) -> dict[str, Any]:
    """Two GPUs under one switch of socket 0, one GPU on socket 1, and the given NICs."""
    return {
        "name": "t",
        "gpus": [
            {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "numa_node": 0, "pcie": ["cpu0", "rp0", "sw0"]},
            {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "numa_node": 0, "pcie": ["cpu0", "rp0", "sw0"]},
            {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "numa_node": 1, "pcie": ["cpu1", "rp1"]},
        ],
        "nics": list(nics),
    }


def test_a_nic_with_only_a_name_gets_defaults() -> None:
    (nic,) = parse_machine_description(machine({"name": "mlx5_0"})).nics
    assert (nic.name, nic.netdev, nic.pci_bus_id, nic.numa_node) == ("mlx5_0", None, default_nic_bus_id(0), 0)
    assert nic.pcie_path == ("cpu0",) and nic.link_gbit_per_s is None


def test_every_field_is_read_and_the_bus_id_normalised() -> None:
    raw = {"name": "mlx5_3", "netdev": "ibp12s0", "pci_bus_id": "00000000:0C:00.0", "numa_node": 0}
    (nic,) = parse_machine_description(machine({**raw, "pcie": ["cpu0", "rp0", "sw0"], "link_gbps": 400})).nics
    assert (nic.netdev, nic.pci_bus_id, nic.pcie_path, nic.link_gbit_per_s) == (
        "ibp12s0",
        "0000:0c:00.0",
        ("cpu0", "rp0", "sw0"),
        400.0,
    )


def test_a_nic_may_have_no_numa_node() -> None:
    (nic,) = parse_machine_description(machine({"name": "mlx5_0", "numa_node": None})).nics
    assert nic.numa_node is None


def test_no_nics_key_means_no_nics() -> None:
    doc = machine()
    del doc["nics"]
    assert parse_machine_description(doc).nics == ()


BAD = [
    ([{"name": "mlx5_0", "speed": 100}], "nics[0].speed"),
    ([{"netdev": "ib0"}], "nics[0].name"),
    ([{"name": "mlx5 0"}], "nics[0].name"),
    ([{"name": "mlx5_0"}, {"name": "mlx5_0"}], "nics[1].name"),
    ([{"name": "mlx5_0", "netdev": "a-name-far-too-long"}], "nics[0].netdev"),
    ([{"name": "mlx5_0", "pci_bus_id": "zz:00"}], "nics[0].pci_bus_id"),
    ([{"name": "mlx5_0", "pci_bus_id": "0000:10:00.0"}], "nics[0].pci_bus_id"),
    ([{"name": "a"}, {"name": "b"}, {"name": "c", "numa_node": -1}], "nics[2].numa_node"),
    ([{"name": "mlx5_0", "numa_node": "0"}], "nics[0].numa_node"),
    ([{"name": "mlx5_0", "link_gbps": 0}], "nics[0].link_gbps"),
    ([{"name": "mlx5_0", "link_gbps": 100000}], "nics[0].link_gbps"),
    ([{"name": "mlx5_0", "link_gbps": True}], "nics[0].link_gbps"),
    ([{"name": "mlx5_0", "pcie": []}], "nics[0].pcie"),
    ([{"name": "mlx5_0", "pcie": ["cpu0", 3]}], "nics[0].pcie[1]"),
    ([{"name": "mlx5_0", "pcie": ["cpu1", "rp0"], "numa_node": 1}], "nics[0].pcie[1]"),
    ([{"name": "mlx5_0", "pcie": ["cpu0", "rp1"], "numa_node": 0}], "nics[0].pcie[1]"),
    ([{"name": "mlx5_0", "pcie": ["cpu1", "rp1"], "numa_node": 0}], "nics[0].numa_node"),
    (["mlx5_0"], "nics[0]"),
]
BAD_IDS = [
    "unknown key",
    "name missing",
    "name with a space",
    "duplicate name",
    "netdev over 15 characters",
    "bus id not an address",
    "bus id of a GPU",
    "negative NUMA node (write null for none)",
    "NUMA node as a string",
    "zero link rate",
    "impossible link rate",
    "boolean link rate",
    "empty PCIe path",
    "path component not a string",
    "host bridge under another socket than the GPUs say",
    "host bridge of socket 1 under socket 0",
    "NUMA node other than the GPUs under the same host bridge",
    "entry not a mapping",
]


@pytest.mark.parametrize(("nics", "field"), BAD, ids=BAD_IDS)
def test_bad_nic_entries_name_the_field(nics: list[Any], field: str) -> None:
    with pytest.raises(MachineDescriptionError) as error:
        parse_machine_description(machine(*nics))
    assert error.value.field == field


def test_nics_must_be_a_list() -> None:
    doc = machine()
    doc["nics"] = {"name": "mlx5_0"}
    with pytest.raises(MachineDescriptionError) as error:
        parse_machine_description(doc)
    assert error.value.field == "nics"


SHIPPED_NIC_COUNTS = [
    ("dgx1-v100", 4),
    ("dgx-a100", 8),
    ("hgx-h100", 8),
    ("pcie-8gpu-2socket", 2),
    ("pcie-8gpu-2nic", 2),
    ("hgx-h200", 0),
    ("workstation-4gpu", 0),
]


@pytest.mark.parametrize(("name", "count"), SHIPPED_NIC_COUNTS, ids=[n for n, _ in SHIPPED_NIC_COUNTS])
def test_shipped_machines_carry_their_real_nics(name: str, count: int) -> None:
    fake = FakeNvml(load_machine_description(name))
    nics = fake.nics()
    assert len(nics) == count
    assert [nic.name for nic in nics] == [f"mlx5_{i}" for i in range(count)]
    for nic in nics:
        assert fake.pcie_path(nic.pci_bus_id) == nic.pcie_path


def test_fake_lists_nics_by_name_with_numbers_compared_as_numbers() -> None:
    names = [f"mlx5_{i}" for i in (10, 2, 0)]
    fake = FakeNvml(parse_machine_description(machine(*({"name": n} for n in names))))
    assert [nic.name for nic in fake.nics()] == ["mlx5_0", "mlx5_2", "mlx5_10"]


def test_fake_has_no_path_for_an_unknown_device() -> None:
    assert FakeNvml.from_machine("dgx1-v100").pcie_path("0000:ff:1f.7") is None
