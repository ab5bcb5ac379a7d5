"""Nodes for the time-slicing tests: shipped machine descriptions, plus a synthetic helper.

`gpus()` builds GpuInfo values directly, only for shapes no shipped machine has (mixed memory sizes).
"""

from __future__ import annotations

from collections.abc import Sequence

from device_plugin.core.devices import Device
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.types import GpuInfo


def machine_gpus(name: str) -> tuple[GpuInfo, ...]:
    return FakeNvml.from_machine(name).gpus()


def gpus(count: int, *, memory_mib: int = 81920, gpus_per_numa: int = 4) -> tuple[GpuInfo, ...]:
    """`count` GPUs; NUMA node = index // gpus_per_numa (a 2-socket 8-GPU server by default)."""
    return tuple(
        GpuInfo(
            index=i,
            uuid=f"GPU-{i:08x}-1111-2222-3333-444455556666",
            name="NVIDIA H100 80GB HBM3",
            memory_mib=memory_mib,
            pci_bus_id=f"0000:{0x10 + i:02x}:00.0",
            numa_node=i // gpus_per_numa,
        )
        for i in range(count)
    )


def base_devices(infos: Sequence[GpuInfo]) -> tuple[Device, ...]:
    """Whole-GPU devices as the plugin advertises them: id = UUID."""
    return tuple(Device(g.uuid, (g.index,), g.numa_node) for g in infos)


def mig_devices(parent: GpuInfo, count: int, profile_tag: str = "1g") -> tuple[Device, ...]:
    """`count` MIG devices on `parent` (ids are MIG UUIDs, gpu_indices the parent's)."""
    return tuple(
        Device(
            f"MIG-{profile_tag}-{parent.index:02d}{j:02d}-aaaa-bbbb-cccc-ddddeeeeffff",
            (parent.index,),
            parent.numa_node,
        )
        for j in range(count)
    )


# Named nodes used across the tests.
SERVER_8 = machine_gpus("hgx-h100")  # 8 GPUs, 2 NUMA nodes of 4
WORKSTATION_4 = machine_gpus("workstation-4gpu")  # 4 GPUs, one NUMA node
