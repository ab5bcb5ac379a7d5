"""How a resource chooses devices for GetPreferredAllocation, and what Allocate hands a container.

Two small protocols:
- AllocationPolicy.choose(): pick `size` devices for a ValidatedRequest
  (device_plugin.allocation.request; the policy trusts it and checks nothing again). The
  topology-aware policy (whole_gpu_selection) and the MIG / replica policies implement it too.
- ResponseBuilder.build(): the ContainerAllocation for a set of devices (env, mounts, CDI ...).
Both are pure: no I/O, no clock, and the result never depends on input order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from device_plugin.allocation.request import ValidatedRequest
from device_plugin.core.devices import ContainerAllocation, Device

VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"


def device_sort_key(device: Device) -> tuple[tuple[int, ...], str]:
    """Canonical order of devices: by physical GPU index, then ID. Used for every tie-break."""
    return (device.gpu_indices, device.id)


class AllocationPolicy(Protocol):
    def choose(self, request: ValidatedRequest) -> tuple[str, ...]:
        """Return exactly `request.size` IDs from `request.available`, containing every must_include
        ID.

        The request is valid (see ValidatedRequest for what that guarantees); the caller checks the
        answer.
        """
        ...


class ResponseBuilder(Protocol):
    def build(self, devices: Sequence[Device]) -> ContainerAllocation:
        """The allocation for one container; `devices` are known, healthy, in canonical order."""
        ...
