"""Value types for what a resource advertises and what Allocate returns.

Pure data: no gRPC, no NVML. The servicer translates these to and from protobuf.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType


class Health(StrEnum):
    # The kubelet treats exactly "Healthy" as healthy.
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"


@dataclass(frozen=True)
class Device:
    """One schedulable unit of a resource: a whole GPU, a MIG device or a replica.

    `gpu_indices` are the NVML indices of the physical GPU(s) behind it (one for every kind we
    advertise today); allocation and health fan-out work through them.
    """

    id: str
    gpu_indices: tuple[int, ...]
    numa_node: int | None
    health: Health = Health.HEALTHY
    health_reason: str = ""

    @property
    def healthy(self) -> bool:
        return self.health is Health.HEALTHY


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool = True


@dataclass(frozen=True)
class DeviceSpec:
    container_path: str
    host_path: str
    permissions: str = "rw"


def _frozen_map(values: Mapping[str, str] | None = None) -> Mapping[str, str]:
    return MappingProxyType(dict(values or {}))


@dataclass(frozen=True)
class ContainerAllocation:
    """What one container gets from Allocate (mirrors ContainerAllocateResponse)."""

    envs: Mapping[str, str] = field(default_factory=_frozen_map)
    mounts: tuple[Mount, ...] = ()
    device_specs: tuple[DeviceSpec, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=_frozen_map)
    cdi_devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceListSnapshot:
    """The full device list at one version; ListAndWatch sends one per change."""

    version: int
    devices: tuple[Device, ...]
    closed: bool = False  # the resource is going away: send this (empty) list, then end the stream
