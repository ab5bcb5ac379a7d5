"""Topology-blind stand-ins for the allocation protocols, for tests and benchmarks that need a resource
without the allocator: the lowest devices first, and NVIDIA's plain `envvar` answer. The daemon never uses
them (it composes whole_gpu_selection and StrategyResponseBuilder).
"""

from __future__ import annotations

from collections.abc import Sequence

from device_plugin.allocation.protocols import VISIBLE_DEVICES_ENV, device_sort_key
from device_plugin.allocation.request import ValidatedRequest
from device_plugin.core.devices import ContainerAllocation, Device
from device_plugin.core.ids import parse_device_id


class LowestIndexPolicy:
    """must_include first, then the lowest devices in canonical order. Topology-blind fallback."""

    def choose(self, request: ValidatedRequest) -> tuple[str, ...]:
        devices, size = request.devices, request.size
        chosen = list(request.must_include)
        taken = set(chosen)
        for device_id in request.available:
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
