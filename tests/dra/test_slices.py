"""ResourceSlices of every shipped machine: best sets by the allocator's objective, limits, API validity."""

from __future__ import annotations

import json
from itertools import combinations

import kubernetes_validate
import pytest

from device_plugin.cli import main
from device_plugin.core.names import OWN_DOMAIN as OWN
from device_plugin.dra.inventory import (
    OWN_ATTRIBUTES,
    STANDARD,
    DraDevice,
    build_devices,
    semver,
)
from device_plugin.dra_helper.api.devices import MAX_ATTRIBUTES_AND_CAPACITIES
from device_plugin.dra_helper.api.slices import MAX_DEVICES_PER_SLICE, build_slices
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.description import parse_machine_description
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.pcie_paths import is_root_bus_name
from device_plugin.topology.build import build_topology
from tests.allocation.brute_force import BruteForce
from tests.allocation.machines import topology_of
from tests.dra.machine_devices import devices_of

MACHINES = shipped_machine_names()


def attrs(device: DraDevice) -> dict[str, object]:
    return {name: value for name, _, value in device.attributes}


@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
def test_each_best_set4_group_is_an_optimal_4set_of_what_earlier_groups_left(machine: str) -> None:
    devices, partitions = devices_of(machine)
    whole = sorted(d.gpu_index for d in devices if attrs(d)["type"] == "gpu")
    brute = BruteForce(topology_of(machine))
    remaining = set(whole)
    for group in partitions.groups.get(4, ()):
        if len(whole) <= 8:  # the full objective (criteria 1-5) by exhaustive search
            assert group == brute.best(remaining, set(), 4)
        else:  # 16 GPUs: the exhaustive fragmentation term is too slow; check criteria 1-3 are maximal
            best = max(
                (brute.ring(frozenset(c)), brute.total(frozenset(c)), -brute.numa_nodes(frozenset(c)))
                for c in combinations(sorted(remaining), 4)
            )
            g = frozenset(group)
            assert (brute.ring(g), brute.total(g), -brute.numa_nodes(g)) == best
        remaining -= set(group)
    assert len(remaining) < 4 or 4 not in partitions.groups


@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
def test_best_set_attributes_are_disjoint_groups_of_exactly_k_and_only_sizes_the_node_has(machine: str) -> None:
    devices, _ = devices_of(machine)
    gpus = [d for d in devices if attrs(d)["type"] == "gpu"]
    assert not any(f"{OWN}/bestSet2" in attrs(d) for d in gpus)  # no shipped claim reads it: not published
    for k in (4, 8, 16):
        by_value: dict[object, list[str]] = {}
        for d in gpus:
            if f"{OWN}/bestSet{k}" in attrs(d):
                by_value.setdefault(attrs(d)[f"{OWN}/bestSet{k}"], []).append(d.name)
        assert all(len(members) == k for members in by_value.values())
        assert len(by_value) == len(gpus) // k  # every full group published, no more
        assert sorted(by_value) == list(range(len(by_value)))


@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
def test_listing_order_keeps_every_largest_group_and_its_pairs_contiguous(machine: str) -> None:
    devices, partitions = devices_of(machine)
    positions = {d.gpu_index: i for i, d in enumerate(devices) if attrs(d)["type"] == "gpu"}
    if not partitions.groups:
        pytest.skip("no whole GPUs to partition")
    largest = max(partitions.groups)
    for group in partitions.groups[largest]:
        spots = sorted(positions[g] for g in group)
        assert spots == list(range(spots[0], spots[0] + largest))
    nested_pairs = [
        p for p in partitions.groups.get(2, ()) if any(set(p) <= set(g) for g in partitions.groups[largest])
    ]
    for pair in nested_pairs:
        assert abs(positions[pair[0]] - positions[pair[1]]) == 1


@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
@pytest.mark.parametrize("api_version", ["v1", "v1beta2", "v1beta1"])
def test_slices_validate_against_the_kubernetes_schema(machine: str, api_version: str) -> None:
    devices, _ = devices_of(machine)
    for obj in build_slices(
        devices,
        node_name="node-a",
        driver_name="gpu.nvidia.com",
        generation=3,
        api_version=api_version,
        node_uid="0c6d7f0e-1111-2222-3333-444455556666",
    ):
        kubernetes_validate.validate(obj, "1.34", strict=True)
        for device in obj["spec"]["devices"]:
            body = device.get("basic", device)
            assert len(body["attributes"]) + len(body["capacity"]) <= MAX_ATTRIBUTES_AND_CAPACITIES


def test_a_broken_slice_is_caught_by_the_schema_check() -> None:
    devices, _ = devices_of("dgx1-v100")
    (obj,) = build_slices(devices, node_name="n", driver_name="gpu.nvidia.com", generation=1)
    obj["spec"]["devices"][0]["attributes"]["uuid"] = {"string": 5}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(obj, "1.34", strict=True)


def test_more_than_128_devices_split_into_slices_of_one_pool_and_generation() -> None:
    device = DraDevice("gpu-0", "GPU-x", 0, (("type", "string", "gpu"),), (("memory", "1Gi"),))
    many = [DraDevice(f"gpu-{i}", f"GPU-{i}", i, device.attributes, device.capacity) for i in range(300)]
    slices = build_slices(many, node_name="n", driver_name="gpu.nvidia.com", generation=7)
    assert [len(s["spec"]["devices"]) for s in slices] == [MAX_DEVICES_PER_SLICE, MAX_DEVICES_PER_SLICE, 44]
    assert {(s["spec"]["pool"]["generation"], s["spec"]["pool"]["resourceSliceCount"]) for s in slices} == {(7, 3)}
    assert [d["name"] for s in slices for d in s["spec"]["devices"]] == [d.name for d in many]
    assert len({s["metadata"]["name"] for s in slices}) == 3


def test_slices_in_name_order_list_the_devices_in_our_order_past_ten_slices() -> None:
    """Kubernetes 1.36+ takes a pool's slices in name order; `-10` must not come before `-2`."""
    device = DraDevice("gpu-0", "GPU-x", 0, (("type", "string", "gpu"),), (("memory", "1Gi"),))
    many = [DraDevice(f"gpu-{i}", f"GPU-{i}", i, device.attributes, device.capacity) for i in range(12 * 128)]
    slices = build_slices(many, node_name="n", driver_name="gpu.gpu-device-plugin.io", generation=2)
    assert len(slices) == 12 and {s["spec"]["pool"]["generation"] for s in slices} == {2}
    by_name = sorted(slices, key=lambda s: s["metadata"]["name"])
    assert [d["name"] for s in by_name for d in s["spec"]["devices"]] == [d.name for d in many]


def test_owner_reference_names_the_node_when_its_uid_is_known() -> None:
    devices, _ = devices_of("single-gpu")
    (with_uid,) = build_slices(devices, node_name="n", driver_name="gpu.nvidia.com", generation=1, node_uid="u-1")
    (offline,) = build_slices(devices, node_name="n", driver_name="gpu.nvidia.com", generation=1)
    assert with_uid["metadata"]["ownerReferences"][0] | {} == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "n",
        "uid": "u-1",
        "controller": True,
    }
    assert "ownerReferences" not in offline["metadata"]


def test_mig_gpus_are_published_as_mig_devices_named_as_nvidias_driver_names_them() -> None:
    devices, partitions = devices_of("h100-mig-mixed")
    names = [d.name for d in devices]
    assert "gpu-0" not in names and "gpu-3" not in names  # MIG mode: only its MIG devices
    assert {"gpu-4", "gpu-5", "gpu-6", "gpu-7"} <= set(names)
    mig = [d for d in devices if attrs(d)["type"] == "mig"]
    assert mig and all(d.name.startswith(f"gpu-{attrs(d)['minor']}-mig-") for d in mig)
    assert all(g not in {0, 1, 2, 3} for group in partitions.groups[4] for g in group)
    seven = [d for d in mig if attrs(d)["profile"] == "7g.80gb"]
    assert [d.name for d in seven] == ["gpu-3-mig-7g80gb-0-0"]  # GI profile 0 (7g) spans all 8 memory slices


def test_an_unhealthy_gpu_leaves_the_pool_and_the_partitions_are_recomputed() -> None:
    devices, _ = devices_of("dgx1-v100")
    sick = devices[0]
    after, partitions = devices_of("dgx1-v100", exclude=(sick.uuid,))
    assert sick.name not in [d.name for d in after] and len(after) == len(devices) - 1
    assert 8 not in partitions.groups and all(sick.gpu_index not in g for g in partitions.groups[4])


@pytest.mark.parametrize(
    ("text", "expected"),
    [("535.161.08", "535.161.8"), ("12.2", "12.2.0"), ("550.54.15", "550.54.15"), ("9", "9.0.0")],
    ids=["leading-zero-dropped", "two-parts-padded", "already-semver", "one-part"],
)
def test_versions_become_semver(text: str, expected: str) -> None:
    assert semver(text) == expected


@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
def test_every_device_of_a_simulated_machine_carries_its_gpus_pcie_root_from_the_topology(machine: str) -> None:
    topology = topology_of(machine)
    devices, _ = devices_of(machine)
    for device in devices:  # MIG devices too: a MIG device sits where its GPU sits
        root = attrs(device)[STANDARD + "pcieRoot"]
        assert root == topology.pcie_root(device.gpu_index) and is_root_bus_name(str(root))


UNKNOWN_PLACEMENT = {
    "name": "cloud-vm",
    "gpus": [
        {"model": "NVIDIA L40S", "memory_mib": 46068, "numa_node": None},  # no NUMA, no PCIe tree
        {"model": "NVIDIA L40S", "memory_mib": 46068, "numa_node": 1, "pcie": ["cpu1", "pci0000:80"]},
        {"model": "NVIDIA L40S", "memory_mib": 46068},  # NUMA node not given: unknown too, never a guessed 0
    ],
}


def test_pcie_root_and_numa_node_are_published_only_where_known() -> None:
    fake = FakeNvml(parse_machine_description(UNKNOWN_PLACEMENT))
    unknown, known, not_given = (
        attrs(d) for d in sorted(build_devices(fake, build_topology(fake))[0], key=lambda d: d.gpu_index)
    )
    assert STANDARD + "pcieRoot" not in unknown and STANDARD + "numaNode" not in unknown
    assert STANDARD + "numaNode" not in not_given
    assert (known[STANDARD + "pcieRoot"], known[STANDARD + "numaNode"]) == ("pci0000:80", 1)


@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
def test_dra_slices_command_prints_json_on_every_shipped_machine(
    machine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dra", "slices", "--machine", machine, "--node-name", "node-a", "--json"]) == 0
    slices = json.loads(capsys.readouterr().out)
    devices, _ = devices_of(machine)
    assert [d["name"] for s in slices for d in s["spec"]["devices"]] == [d.name for d in devices]
    assert {s["spec"]["pool"]["name"] for s in slices} == {"node-a"}


def test_dra_slices_command_refuses_an_unknown_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dra", "slices", "--machine", "no-such-machine", "--json"]) == 2
    assert "unknown machine" in capsys.readouterr().err


NIC_CASES = {
    # machine: distinct nearest NICs
    "hgx-h100": 8,  # one NIC per GPU on the GPU's own switch
    "pcie-8gpu-2nic": 2,  # NICs on two of four switches
    "dgx1-v100": 4,  # one NIC per switch pair
}


@pytest.mark.parametrize("machine", sorted(NIC_CASES), ids=sorted(NIC_CASES))
def test_each_gpu_names_its_nearest_nic(machine: str) -> None:
    topology = topology_of(machine)
    devices, _ = devices_of(machine)
    gpus = [attrs(d) for d in devices if attrs(d)["type"] == "gpu"]
    assert len({a[f"{OWN}/nearestNIC"] for a in gpus}) == NIC_CASES[machine]
    for a in gpus:  # the topology's nearest NIC of that GPU
        gpu = int(str(a["index"]))
        assert a[f"{OWN}/nearestNIC"] == topology.nic_names[topology.nearest_nic(gpu)]


@pytest.mark.parametrize("machine", ["workstation-4gpu", "single-gpu"], ids=["workstation", "single-gpu"])
def test_a_node_without_rdma_nics_publishes_no_nic_attributes(machine: str) -> None:
    devices, _ = devices_of(machine)
    named = {name.rsplit("/", 1)[-1] for d in devices for name in attrs(d)}
    assert not {"nearestNIC", "nearestNICDistance", "gpuDirectNIC"} & named
    assert f"{OWN}/nvlinkDomain" in attrs(devices[0])  # our attributes are there, only the NIC ones are not


def test_our_own_attributes_follow_the_configured_domain() -> None:
    fake = FakeNvml.from_machine("dgx1-v100")
    devices, _ = build_devices(fake, topology_of("dgx1-v100"), own_domain="gpus.example.org")
    names = {name for d in devices for name in attrs(d)}
    ours = {name.split("/", 1)[1] for name in names if name.startswith("gpus.example.org/")}
    # 8 GPUs: no 16-set; NICs: the NIC attributes; no NVLink fabric beyond the node: no clique; memoryShares off
    assert ours == set(OWN_ATTRIBUTES) - {"bestSet16", "clique", "memoryIsolation"}
    assert not any(name.startswith(f"{OWN}/") for name in names)


def test_dra_slices_command_takes_the_domain_from_the_config(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\ngpuDevicePlugin: {ownDomain: gpus.example.org}\n")
    assert main(["dra", "slices", "--machine", "hgx-h100", "--config", str(config), "--json"]) == 0
    (obj,) = json.loads(capsys.readouterr().out)
    assert obj["spec"]["devices"][0]["attributes"]["gpus.example.org/bestSet4"] == {"int": 0}
