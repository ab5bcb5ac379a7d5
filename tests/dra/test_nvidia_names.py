"""Our names never clash with NVIDIA's: every DRA attribute, capacity and node label that we publish, on
every shipped machine, is either one of NVIDIA's published names with NVIDIA's meaning, a Kubernetes
standard attribute, or ours under our own domain with a name NVIDIA does not use.

NVIDIA's names, as published (kubernetes-sigs/dra-driver-nvidia-gpu v0.5.0 and its older releases as
NVIDIA/k8s-dra-driver-gpu; gpu-feature-discovery's label keys), are written out here rather than read
from our code, so a rename on our side cannot make the test agree with itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pytest

from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.core.names import OWN_DOMAIN, foreign_owner
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.observability.labels import (
    LabelOptions,
    MigResourceLabelInput,
    SharingLabelInput,
    compute_labels,
)
from tests.dra.machine_devices import devices_of

# NVIDIA's DRA driver, whole GPUs and MIG devices (in its driver's domain, written without one).
NVIDIA_SAME_MEANING = {
    "type",  # gpu | mig
    "uuid",
    "parentUUID",
    "profile",
    "productName",
    "architecture",
    "cudaComputeCapability",
    "driverVersion",
    "cudaDriverVersion",
    "index",  # older releases
    "minor",  # older releases
    "pcieBusID",  # older releases
}
# Published by NVIDIA's driver with a meaning we do not give: Fabric Manager partitions and module IDs
# (behind its FabricManagerPartitioning gate), VFIO pass-through devices, the addressing mode.
NVIDIA_OTHER_MEANING = {
    "partition1",
    "partition2",
    "partition4",
    "partition8",
    "gpuModuleId",
    "gpuModuleID",  # as the release notes spell it
    "brand",
    "addressingMode",
    "deviceID",
    "vendorID",
    "iommuFDEnabled",
}
NVIDIA_ATTRIBUTES = NVIDIA_SAME_MEANING | NVIDIA_OTHER_MEANING
NVIDIA_CAPACITIES = {"memory", "multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines"}
NVIDIA_CAPACITIES_SAME_MEANING = {"memory"}
# Kubernetes' standard device attributes (k8s.io/dynamic-resource-allocation/deviceattribute).
KUBERNETES_STANDARD = {f"resource.kubernetes.io/{name}" for name in ("pciBusID", "pcieRoot", "numaNode")}

# gpu-feature-discovery's label keys. A resource is nvidia.com/gpu, nvidia.com/mig-<profile> or a renamed
# shared resource (nvidia.com/gpu.shared), so the per-resource keys are matched by their ending.
_GFD_PER_RESOURCE = (
    r"count|replicas|sharing-strategy|product|memory|family|compute\.major|compute\.minor"
    r"|multiprocessors|slices\.gi|slices\.ci|engines\.(copy|decoder|encoder|jpeg|ofa)"
)
GFD_LABELS = (
    re.compile(r"^nvidia\.com/cuda\.driver-version\.(major|minor|revision|full)$"),
    re.compile(r"^nvidia\.com/cuda\.runtime-version\.(major|minor|full)$"),
    re.compile(r"^nvidia\.com/cuda\.driver\.(major|minor|rev)$"),
    re.compile(r"^nvidia\.com/cuda\.runtime\.(major|minor)$"),
    re.compile(rf"^nvidia\.com/(gpu|mig-[a-z0-9.+-]+|[a-z0-9-]+(\.[a-z0-9-]+)*?)\.({_GFD_PER_RESOURCE})$"),
    re.compile(
        r"^nvidia\.com/(mig\.capable|mig\.strategy|mps\.capable|gpu\.mode|gpu\.machine|gpu\.clique|gpu\.present"
        r"|vgpu\.present|vgpu\.host-driver-version|vgpu\.host-driver-branch|gfd\.timestamp)$"
    ),
)
MACHINES = shipped_machine_names()
ALL_MIG = {"a100-mig-7x1g"}  # every GPU in MIG mode: no whole GPU is published


def attribute_clashes(names: Iterable[str], own_domain: str = OWN_DOMAIN) -> list[str]:
    """Each DRA attribute name of ours that reads as NVIDIA's or Kubernetes' without meaning the same."""
    found = []
    for name in names:
        domain, _, short = name.rpartition("/")
        if not domain:
            if short in NVIDIA_OTHER_MEANING:
                found.append(f"{name}: NVIDIA's driver publishes it with another meaning")
            elif short not in NVIDIA_SAME_MEANING:
                found.append(f"{name}: ours, but in the driver's domain instead of {own_domain}")
        elif domain == own_domain:
            if short in NVIDIA_ATTRIBUTES:
                found.append(f"{name}: ours, under one of NVIDIA's attribute names")
        elif name not in KUBERNETES_STANDARD:
            found.append(f"{name}: under {domain}, neither ours nor a Kubernetes standard attribute")
    return found


def label_clashes(keys: Iterable[str], own_domain: str = OWN_DOMAIN) -> list[str]:
    """Each node label of ours that sits in a foreign namespace without being one of GFD's keys."""
    found = []
    for key in keys:
        domain = key.split("/", 1)[0] if "/" in key else ""
        if domain == "nvidia.com":
            if not any(pattern.match(key) for pattern in GFD_LABELS):
                found.append(f"{key}: under nvidia.com but not one of gpu-feature-discovery's keys")
        elif domain != own_domain or foreign_owner(domain) is not None:
            found.append(f"{key}: under {domain or 'no domain'}, not {own_domain}")
    return found


def published_attributes(machine: str, own_domain: str = OWN_DOMAIN) -> tuple[set[str], set[str]]:
    devices, _ = devices_of(machine, own_domain=own_domain)
    attributes = {name for d in devices for name, _, _ in d.attributes}
    capacities = {name for d in devices for name, _ in d.capacity}
    return attributes, capacities


def written_labels(machine: str, own_domain: str = OWN_DOMAIN) -> set[str]:
    """Every label the node could carry: time-slicing with a renamed resource, MIG per-profile keys."""
    options = LabelOptions(
        mig_strategy="mixed",
        sharing={
            "nvidia.com/gpu": SharingLabelInput("time-slicing", 4, replica_memory_mib=8192),
            "nvidia.com/gpu.shared": SharingLabelInput("time-slicing", 2, renamed=True, replica_memory_mib=16384),
        },
        machine_type="DGX H100",
        mig_resources={"nvidia.com/mig-1g.10gb": MigResourceLabelInput(count=7, memory_mib=9856, multiprocessors=16)},
        own_domain=own_domain,
    )
    return set(compute_labels(FakeNvml.from_machine(machine), options))


@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
def test_no_dra_attribute_or_capacity_of_ours_clashes_with_nvidias(machine: str) -> None:
    attributes, capacities = published_attributes(machine)
    assert attribute_clashes(attributes) == []
    assert capacities <= NVIDIA_CAPACITIES_SAME_MEANING
    if machine not in ALL_MIG:  # whole GPUs carry ours (MIG devices carry only NVIDIA's and the standard ones)
        assert any(name.startswith(f"{OWN_DOMAIN}/") for name in attributes)


@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
def test_no_node_label_of_ours_sits_in_nvidias_namespace(machine: str) -> None:
    labels = written_labels(machine)
    assert label_clashes(labels) == []
    assert any(key.startswith(f"{OWN_DOMAIN}/") for key in labels)


def test_a_configured_domain_carries_every_name_of_ours() -> None:
    attributes, _ = published_attributes("dgx1-v100", "gpus.example.org")
    assert attribute_clashes(attributes, "gpus.example.org") == []
    assert label_clashes(written_labels("dgx1-v100", "gpus.example.org"), "gpus.example.org") == []


def test_the_default_driver_name_is_ours() -> None:
    assert DEFAULT_DRA_DRIVER_NAME.endswith("." + OWN_DOMAIN) and foreign_owner(DEFAULT_DRA_DRIVER_NAME) is None


# The checks themselves: each of these names is a clash they must catch.
ATTRIBUTE_CLASHES = {
    "our-groups-under-nvidias-fm-name": "partition4",
    "our-groups-in-the-drivers-domain": "bestSet4",
    "our-domain-reusing-nvidias-name": f"{OWN_DOMAIN}/partition4",
    "invented-under-kubernetes-io": "resource.kubernetes.io/nvlinkDomain",
    "under-nvidias-driver-domain": "gpu.nvidia.com/nvlinkDomain",
}
LABEL_CLASHES = {
    "old-nvlink-label": "nvidia.com/gpu.nvlink",
    "old-nic-label": "nvidia.com/gpu.nic-close-fraction",
    "old-replica-memory-label": "nvidia.com/gpu.replica-memory",
    "under-kubernetes-io": "node.kubernetes.io/nvlink-kind",
    "no-domain": "nvlink-kind",
}


@pytest.mark.parametrize("name", ATTRIBUTE_CLASHES.values(), ids=ATTRIBUTE_CLASHES.keys())
def test_the_attribute_check_catches_a_clash(name: str) -> None:
    assert len(attribute_clashes(["uuid", name])) == 1


@pytest.mark.parametrize("key", LABEL_CLASHES.values(), ids=LABEL_CLASHES.keys())
def test_the_label_check_catches_a_clash(key: str) -> None:
    assert len(label_clashes(["nvidia.com/gpu.count", key])) == 1
