"""The machine-description schema: defaults, normalisation, and an error that names the field for every bad input."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from device_plugin.core.errors import MachineDescriptionError
from device_plugin.nvml.fake.description import (
    DEFAULT_DRIVER_VERSION,
    default_pci_bus_id,
    default_uuid,
    parse_machine_description,
    parse_machine_yaml,
)
from device_plugin.nvml.fake.link_description import NvLinkBundle


def machine(gpu_count: int = 4, **top: Any) -> dict[str, Any]:
    """A valid document with `gpu_count` GPUs; keyword arguments replace top-level keys."""
    doc: dict[str, Any] = {
        "name": "t",
        "gpus": [{"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559} for _ in range(gpu_count)],
    }
    doc.update(top)
    return doc


def with_gpu(index: int, **keys: Any) -> dict[str, Any]:
    doc = machine()
    doc["gpus"][index].update(keys)
    return doc


def test_defaults_are_derived_from_name_and_index() -> None:
    desc = parse_machine_description(machine(3))
    assert desc.driver_version == DEFAULT_DRIVER_VERSION
    assert [g.index for g in desc.gpus] == [0, 1, 2]
    assert [g.uuid for g in desc.gpus] == [default_uuid("t", i) for i in range(3)]
    assert [g.pci_bus_id for g in desc.gpus] == ["0000:10:00.0", "0000:11:00.0", "0000:12:00.0"]
    assert all(g.numa_node is None and g.pcie == ("cpu0",) for g in desc.gpus)  # NUMA not given: unknown
    assert desc.nvlinks == () and desc.nvswitch == ()


def test_default_uuid_is_stable_and_distinct_per_machine() -> None:
    assert default_uuid("a", 0) == default_uuid("a", 0)
    assert len({default_uuid("a", 0), default_uuid("a", 1), default_uuid("b", 0)}) == 3
    assert default_uuid("a", 0).startswith("GPU-")


def test_default_bus_ids_stay_valid_past_bus_ff() -> None:
    ids = {default_pci_bus_id(i) for i in range(600)}
    assert len(ids) == 600
    assert default_pci_bus_id(0xF0) == "0001:10:00.0"


def test_default_pcie_follows_numa_node() -> None:
    desc = parse_machine_description(with_gpu(2, numa_node=1))
    assert desc.gpus[2].pcie == ("cpu1",)


def test_null_numa_node_means_unknown() -> None:
    assert parse_machine_description(with_gpu(0, numa_node=None)).gpus[0].numa_node is None


def test_bus_id_is_normalised_to_sysfs_form() -> None:
    desc = parse_machine_description(with_gpu(0, pci_bus_id="00000000:0A:00.0"))
    assert desc.gpus[0].pci_bus_id == "0000:0a:00.0"


def test_nvlinks_do_not_depend_on_listing_order() -> None:
    a = parse_machine_description(machine(nvlinks=[[0, 1, 2], [3, 2, 1]]))
    b = parse_machine_description(machine(nvlinks=[[2, 3, 1], [1, 0, 2]]))
    assert a == b
    assert a.nvlinks == (NvLinkBundle(0, 1, 2), NvLinkBundle(2, 3, 1))


def test_nvswitch_all_expands_to_every_gpu() -> None:
    desc = parse_machine_description(machine(nvswitch=[{"gpus": "all", "links_per_gpu": 12}]))
    assert desc.nvswitch[0].gpus == (0, 1, 2, 3)


BAD = [
    ("not-a-mapping", ["gpus"], "machine"),
    ("unknown-top-key", machine(gpu_count=1, cpus=2), "cpus"),
    ("missing-name", {"gpus": machine()["gpus"]}, "name"),
    ("missing-gpus", {"name": "t"}, "gpus"),
    ("no-gpus", machine(0), "gpus"),
    ("name-not-string", machine(name=7), "name"),
    ("driver-unquoted-float", machine(driver_version=550.54), "driver_version"),
    ("unknown-gpu-key", with_gpu(3, mig=True), "gpus[3].mig"),
    ("missing-model", {"name": "t", "gpus": [{"memory_mib": 1}]}, "gpus[0].model"),
    ("missing-memory", {"name": "t", "gpus": [{"model": "x"}]}, "gpus[0].memory_mib"),
    ("zero-memory", with_gpu(1, memory_mib=0), "gpus[1].memory_mib"),
    ("memory-as-string", with_gpu(1, memory_mib="80GB"), "gpus[1].memory_mib"),
    ("memory-as-bool", with_gpu(1, memory_mib=True), "gpus[1].memory_mib"),
    ("negative-numa", with_gpu(3, numa_node=-1), "gpus[3].numa_node"),
    ("numa-as-string", with_gpu(3, numa_node="0"), "gpus[3].numa_node"),
    ("bad-uuid", with_gpu(2, uuid="1234"), "gpus[2].uuid"),
    ("bad-bus-id", with_gpu(2, pci_bus_id="06:00"), "gpus[2].pci_bus_id"),
    ("bus-id-in-switch-domain", with_gpu(2, pci_bus_id="fe00:00:00.0"), "gpus[2].pci_bus_id"),
    ("duplicate-uuid", with_gpu(1, uuid=default_uuid("t", 0)), "gpus[1].uuid"),
    ("duplicate-bus-id", with_gpu(3, pci_bus_id="0000:10:00.0"), "gpus[3].pci_bus_id"),
    ("empty-pcie", with_gpu(0, pcie=[]), "gpus[0].pcie"),
    ("pcie-not-list", with_gpu(0, pcie="cpu0"), "gpus[0].pcie"),
    ("pcie-element-not-string", with_gpu(0, pcie=["cpu0", 3]), "gpus[0].pcie[1]"),
    ("pcie-not-a-tree", {"name": "t", "gpus": [
        {"model": "x", "memory_mib": 1, "pcie": ["cpu0", "hb0", "sw0"]},
        {"model": "x", "memory_mib": 1, "pcie": ["cpu1", "hb1", "sw0"], "numa_node": 1},
    ]}, "gpus[1].pcie[2]"),
    ("numa-differs-under-one-host-bridge", {"name": "t", "gpus": [
        {"model": "x", "memory_mib": 1, "pcie": ["cpu0", "hb0"], "numa_node": 0},
        {"model": "x", "memory_mib": 1, "pcie": ["cpu0", "hb0"], "numa_node": 1},
    ]}, "gpus[1].numa_node"),
    ("nvlinks-not-list", machine(nvlinks={"0": 1}), "nvlinks"),
    ("nvlink-pair-only", machine(nvlinks=[[0, 1]]), "nvlinks[0]"),
    ("nvlink-to-missing-gpu", machine(nvlinks=[[0, 1, 1], [2, 4, 1]]), "nvlinks[1][1]"),
    ("nvlink-negative-gpu", machine(nvlinks=[[-1, 1, 1]]), "nvlinks[0][0]"),
    ("nvlink-self", machine(nvlinks=[[2, 2, 1]]), "nvlinks[0]"),
    ("nvlink-zero-links", machine(nvlinks=[[0, 1, 0]]), "nvlinks[0][2]"),
    ("nvlink-negative-links", machine(nvlinks=[[0, 1, -2]]), "nvlinks[0][2]"),
    ("nvlink-duplicate-pair", machine(nvlinks=[[0, 1, 1], [1, 0, 2]]), "nvlinks[1]"),
    ("nvlinks-over-18-per-gpu", machine(nvlinks=[[0, 1, 10], [0, 2, 10]]), "nvlinks"),
    ("nvswitch-unknown-key", machine(nvswitch=[{"gpus": "all", "links_per_gpu": 1, "switches": 6}]),
     "nvswitch[0].switches"),
    ("nvswitch-missing-links", machine(nvswitch=[{"gpus": "all"}]), "nvswitch[0].links_per_gpu"),
    ("nvswitch-zero-links", machine(nvswitch=[{"gpus": "all", "links_per_gpu": 0}]), "nvswitch[0].links_per_gpu"),
    ("nvswitch-gpu-out-of-range", machine(nvswitch=[{"gpus": [0, 9], "links_per_gpu": 1}]), "nvswitch[0].gpus[1]"),
    ("nvswitch-empty", machine(nvswitch=[{"gpus": [], "links_per_gpu": 1}]), "nvswitch[0].gpus"),
    ("nvswitch-gpus-word", machine(nvswitch=[{"gpus": "every", "links_per_gpu": 1}]), "nvswitch[0].gpus"),
    ("gpu-in-two-domains", machine(nvswitch=[
        {"gpus": [0, 1], "links_per_gpu": 1}, {"gpus": [2, 1], "links_per_gpu": 1},
    ]), "nvswitch[1].gpus[1]"),
    ("gpu-twice-in-domain", machine(nvswitch=[{"gpus": [0, 0], "links_per_gpu": 1}]), "nvswitch[0].gpus[1]"),
    ("nvswitch-plus-direct-over-18", machine(
        nvlinks=[[0, 1, 2]], nvswitch=[{"gpus": "all", "links_per_gpu": 18}]
    ), "nvswitch[0].links_per_gpu"),
]  # fmt: skip


@pytest.mark.parametrize(("document", "field"), [(d, f) for _, d, f in BAD], ids=[i for i, _, _ in BAD])
def test_bad_input_names_its_field(document: object, field: str) -> None:
    with pytest.raises(MachineDescriptionError) as caught:
        parse_machine_description(document)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_duplicate_yaml_key_is_refused() -> None:
    text = "name: a\nname: b\ngpus: [{model: x, memory_mib: 1}]\n"
    with pytest.raises(MachineDescriptionError, match="duplicate key") as caught:
        parse_machine_yaml(text, source="dup.yaml")
    assert caught.value.field == "name"


def test_yaml_syntax_error_names_the_source() -> None:
    with pytest.raises(MachineDescriptionError, match=r"broken\.yaml is not valid YAML"):
        parse_machine_yaml("name: [unclosed\n", source="broken.yaml")


def test_error_from_a_file_says_which_file() -> None:
    text = yaml.safe_dump(with_gpu(1, memory_mib=-5))
    with pytest.raises(MachineDescriptionError, match=r"\(in my-node.yaml\)") as caught:
        parse_machine_yaml(text, source="my-node.yaml")
    assert caught.value.field == "gpus[1].memory_mib"
