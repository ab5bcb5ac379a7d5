"""Build a policy's input the way production does: through the resource boundary's one validation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from device_plugin.allocation.protocols import device_sort_key
from device_plugin.allocation.request import ValidatedRequest, validate_preferred
from device_plugin.core.devices import Device


def validated(
    devices: Mapping[str, Device],
    available: Sequence[str],
    must_include: Sequence[str] = (),
    size: int = 1,
    *,
    resource_name: str = "test resource",
) -> ValidatedRequest:
    """validate_preferred over `devices`, ranked in canonical order as ResourceManager ranks them."""
    ordered = sorted(devices.values(), key=device_sort_key)
    rank = {device.id: position for position, device in enumerate(ordered)}
    return validate_preferred(resource_name, devices, rank, available, must_include, size)
