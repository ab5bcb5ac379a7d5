"""How a resource chooses devices for GetPreferredAllocation, and what Allocate hands a container.

Two small protocols with their foundation implementations:
- AllocationPolicy.choose(): pick `size` devices from already-validated input. The topology-aware
  policy (device_plugin.allocator) and the MIG / replica policies implement it too.
- ResponseBuilder.build(): the ContainerAllocation for a set of devices (env, mounts, CDI ...).
Both are pure: no I/O, no clock, and the result never depends on input order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from device_plugin.devices import ContainerAllocation, Device
from device_plugin.ids import parse_device_id

VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"


def device_sort_key(device: Device) -> tuple[tuple[int, ...], str]:
    """Canonical order of devices: by physical GPU index, then ID. Used for every tie-break."""
    return (device.gpu_indices, device.id)


class AllocationPolicy(Protocol):
    def choose(
        self,
        devices: Mapping[str, Device],
        available: Sequence[str],
        must_include: Sequence[str],
        size: int,
    ) -> tuple[str, ...]:
        """Return exactly `size` IDs from `available`, containing every `must_include`.

        Inputs are validated by the caller: IDs are known, `available` is in canonical order
        (device_sort_key) without duplicates, must_include is a subset, len(must_include) <= size
        <= len(available).
        """
        ...


class ResponseBuilder(Protocol):
    def build(self, devices: Sequence[Device]) -> ContainerAllocation:
        """The allocation for one container; `devices` are known, healthy, in canonical order."""
        ...


class LowestIndexPolicy:
    """must_include first, then the lowest devices in canonical order. Topology-blind fallback."""

    def choose(
        self,
        devices: Mapping[str, Device],
        available: Sequence[str],
        must_include: Sequence[str],
        size: int,
    ) -> tuple[str, ...]:
        chosen = list(must_include)
        taken = set(chosen)
        for device_id in available:
            if len(chosen) >= size:
                break
            if device_id not in taken:
                chosen.append(device_id)
                taken.add(device_id)
        return tuple(sorted(chosen, key=lambda i: device_sort_key(devices[i])))


def visible_devices(devices: Sequence[Device]) -> tuple[str, ...]:
    """The GPU/MIG UUIDs behind `devices`, each once (replicas of one GPU name it once)."""
    seen: dict[str, None] = {}
    for device in devices:
        seen.setdefault(parse_device_id(device.id).base, None)
    return tuple(seen)


class EnvVarResponseBuilder:
    """NVIDIA's default `envvar` strategy: NVIDIA_VISIBLE_DEVICES=<uuid,...>."""

    def build(self, devices: Sequence[Device]) -> ContainerAllocation:
        return ContainerAllocation(envs={VISIBLE_DEVICES_ENV: ",".join(visible_devices(devices))})
