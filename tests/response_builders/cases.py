"""The Allocate cases the golden files pin: named nodes (Device values) x strategy settings.

Devices are plain value types (device_plugin.core.devices.Device), as the ResourceManager hands them to a
ResponseBuilder; the UUIDs are fixed so the golden files are stable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from device_plugin.allocation.response_builders import (
    DeviceIdStrategy,
    DeviceListStrategy,
    DeviceNodes,
    ResponseSettings,
)
from device_plugin.core.devices import Device
from device_plugin.core.ids import format_replica_id

GPU_UUIDS = tuple(f"GPU-0000000{i}-aaaa-bbbb-cccc-00000000000{i}" for i in range(4))
MIG_UUIDS = ("MIG-11111111-2222-3333-4444-000000000000", "MIG-11111111-2222-3333-4444-000000000001")
# MIG UUID -> (parent NVML index, MIG device index), as MIG discovery reports it.
MIG_INDICES = {MIG_UUIDS[0]: (1, 0), MIG_UUIDS[1]: (1, 2)}

# A 4-GPU node whose /dev has every control node but nvidia-modeset, and nvidia0..3.
NODES_4GPU = DeviceNodes(
    control=("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"), gpu_minors=frozenset(range(4))
)


def gpu(index: int) -> Device:
    return Device(id=GPU_UUIDS[index], gpu_indices=(index,), numa_node=index // 2)


def replica(index: int, n: int) -> Device:
    return Device(id=format_replica_id(GPU_UUIDS[index], n), gpu_indices=(index,), numa_node=index // 2)


def mig(k: int) -> Device:
    return Device(id=MIG_UUIDS[k], gpu_indices=(1,), numa_node=0)


E, V, CA, CC = (
    DeviceListStrategy.ENVVAR,
    DeviceListStrategy.VOLUME_MOUNTS,
    DeviceListStrategy.CDI_ANNOTATIONS,
    DeviceListStrategy.CDI_CRI,
)
UUID, INDEX = DeviceIdStrategy.UUID, DeviceIdStrategy.INDEX


@dataclass(frozen=True)
class Case:
    name: str  # also the golden file's stem
    settings: ResponseSettings
    devices: Sequence[Device]
    nodes: DeviceNodes = field(default_factory=DeviceNodes)


def s(*strategies: DeviceListStrategy, ids: DeviceIdStrategy = UUID, **extra: object) -> ResponseSettings:
    return ResponseSettings(device_list_strategies=strategies, device_id_strategy=ids, **extra)  # type: ignore[arg-type]


TWO_GPUS = (gpu(0), gpu(2))
CASES = (
    Case("envvar-uuid", s(E), TWO_GPUS),
    Case("envvar-index", s(E, ids=INDEX), TWO_GPUS),
    Case("envvar-replicas-name-each-gpu-once", s(E), (replica(0, 1), replica(1, 0), replica(1, 3))),
    Case("envvar-mig-uuid", s(E), (mig(0), mig(1))),
    Case("envvar-mig-index", s(E, ids=INDEX), (mig(0), mig(1))),
    Case("volume-mounts-uuid", s(V), TWO_GPUS),
    Case("volume-mounts-index", s(V, ids=INDEX), TWO_GPUS),
    Case("cdi-annotations-uuid", s(CA), TWO_GPUS),
    Case("cdi-annotations-custom-prefix", s(CA, cdi_annotation_prefix="example.com/"), TWO_GPUS),
    Case("cdi-cri-uuid", s(CC), TWO_GPUS),
    Case("cdi-cri-index", s(CC, ids=INDEX), TWO_GPUS),
    Case("cdi-cri-mig-index", s(CC, ids=INDEX), (mig(1),)),
    Case("cdi-annotations-and-cdi-cri", s(CA, CC), TWO_GPUS),
    Case("envvar-and-cdi-cri", s(E, CC), TWO_GPUS),
    Case("envvar-and-volume-mounts", s(E, V), TWO_GPUS),
    Case("pass-device-specs-envvar", s(E, pass_device_specs=True), TWO_GPUS, NODES_4GPU),
    Case(
        "pass-device-specs-host-dev-root",
        s(E, pass_device_specs=True, host_dev_root="/run/nvidia/driver"),
        TWO_GPUS,
        NODES_4GPU,
    ),
    Case("pass-device-specs-only-cdi-passes-none", s(CC, pass_device_specs=True), TWO_GPUS, NODES_4GPU),
    Case("pass-device-specs-mig-parent-node", s(E, pass_device_specs=True), (mig(0),), NODES_4GPU),
    Case("all-strategies-with-specs", s(E, V, CA, CC, pass_device_specs=True), (gpu(3), replica(1, 2)), NODES_4GPU),
)
