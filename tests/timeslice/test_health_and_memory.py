"""A fault on a GPU reaches every replica in every resource; what a replica can count on in memory."""

from __future__ import annotations

import pytest

from device_plugin.allocation.resources import ResourceManager
from device_plugin.core.devices import Health
from device_plugin.core.errors import PluginError, UnhealthyDeviceError
from device_plugin.timeslice.memory import NO_MEMORY_ISOLATION_WARNING, describe_sharing, replica_memory_mib
from device_plugin.timeslice.policy import ReplicaPolicy
from device_plugin.timeslice.replicas import share_resources
from testbed.allocation_doubles import EnvVarResponseBuilder, LowestIndexPolicy
from tests.timeslice.node import SERVER_8, WORKSTATION_4, base_devices, gpus, mig_devices
from tests.timeslice.parsed import parse_sharing

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"


def managers() -> dict[str, ResourceManager]:
    """GPU 0 is split into MIG devices (shared); GPUs 1-3 are shared as gpu-small; 4-7 stay whole."""
    migs = mig_devices(SERVER_8[0], 3)
    base = {GPU: base_devices(SERVER_8[1:]), MIG: migs}
    raw = {
        "timeSlicing": {
            "renameByDefault": True,
            "resources": [
                {"name": GPU, "replicas": 4, "devices": [1, 2, 3], "rename": "gpu-small"},
                {"name": MIG, "replicas": 2},
            ],
        }
    }
    advertised = share_resources(base, parse_sharing(raw, gpus=SERVER_8))
    return {
        name: ResourceManager(
            name,
            devices,
            ReplicaPolicy() if name in advertised.shared else LowestIndexPolicy(),
            EnvVarResponseBuilder(),
        )
        for name, devices in advertised.devices.items()
    }


@pytest.mark.parametrize(
    ("gpu", "resource", "expected_unhealthy"),
    [(0, f"{MIG}.shared", 6), (2, "nvidia.com/gpu-small", 4), (5, GPU, 1)],
    ids=["mig-parent-fault-hits-every-mig-replica", "gpu-fault-hits-every-replica", "whole-gpu"],
)
def test_gpu_fault_fans_out_to_every_replica_in_every_resource(
    gpu: int, resource: str, expected_unhealthy: int
) -> None:
    all_managers = managers()
    changed = {name: m.set_gpu_health(gpu, Health.UNHEALTHY, "Xid 79") for name, m in all_managers.items()}
    assert {name: len(ids) for name, ids in changed.items() if ids} == {resource: expected_unhealthy}
    for name, m in all_managers.items():
        for device in m.snapshot().devices:
            assert device.healthy is (gpu not in device.gpu_indices), (name, device.id)
    unhealthy = changed[resource][0]
    with pytest.raises(UnhealthyDeviceError):
        all_managers[resource].allocate([unhealthy])
    # Recovery fans out the same way.
    all_managers[resource].set_gpu_health(gpu, Health.HEALTHY, "recovered")
    assert all(d.healthy for d in all_managers[resource].snapshot().devices)


def test_replica_memory_is_the_smallest_gpu_share() -> None:
    node = (*gpus(3, memory_mib=24576), *gpus(4, memory_mib=12288)[3:])  # GPU 3 is a 12 GiB card
    raw = {
        "timeSlicing": {
            "resources": [
                {"name": GPU, "replicas": 4, "devices": [0, 1], "rename": "big"},
                {"name": GPU, "replicas": 3, "devices": [2, 3], "rename": "mixed"},
            ]
        }
    }
    advertised = share_resources({GPU: base_devices(node)}, parse_sharing(raw, gpus=node))
    memory = {g.uuid: g.memory_mib for g in node}
    assert dict(replica_memory_mib(advertised, memory)) == {"nvidia.com/big": 6144, "nvidia.com/mixed": 4096}
    lines = describe_sharing(advertised, memory)
    assert lines[0] == (
        "nvidia.com/big: 2 x 4 time-sliced replicas of nvidia.com/gpu (distributed); a replica can count on 6144 MiB"
    )
    assert lines[-1] == f"WARNING: {NO_MEMORY_ISOLATION_WARNING}"
    assert "no memory or fault isolation" in NO_MEMORY_ISOLATION_WARNING


def test_replica_memory_needs_every_device() -> None:
    raw = {"timeSlicing": {"resources": [{"name": GPU, "replicas": 2}]}}
    advertised = share_resources({GPU: base_devices(WORKSTATION_4)}, parse_sharing(raw, gpus=WORKSTATION_4))
    with pytest.raises(PluginError, match="no memory size known"):
        replica_memory_mib(advertised, {WORKSTATION_4[0].uuid: WORKSTATION_4[0].memory_mib})


def test_nothing_shared_describes_nothing() -> None:
    advertised = share_resources({GPU: base_devices(WORKSTATION_4)}, None)
    assert describe_sharing(advertised, {}) == ()
    assert dict(replica_memory_mib(advertised, {})) == {}
