"""The time-slicing value types, re-exported for timeslice/'s modules and tests.

The `sharing` section's types live with the config (device_plugin/config/sharing_model.py), which parses
the section when the config loads. GpuRef stays here: only the build-time step that resolves GPU
indices and UUIDs against the node (timeslice/config.py) needs to know about GPUs.
"""

from __future__ import annotations

from typing import Protocol

from device_plugin.config.sharing_model import (
    SHARED_SUFFIX,
    DeviceSelection,
    Placement,
    SelectionEntry,
    SelectionKind,
    SharedResourceSpec,
    SharingConfig,
    TimeSlicingConfig,
)
from device_plugin.core.names import GPU_RESOURCE

__all__ = [
    "GPU_RESOURCE",
    "SHARED_SUFFIX",
    "DeviceSelection",
    "GpuRef",
    "Placement",
    "SelectionEntry",
    "SelectionKind",
    "SharedResourceSpec",
    "SharingConfig",
    "TimeSlicingConfig",
]


class GpuRef(Protocol):
    """What resolving `devices` entries needs to know about a physical GPU (device_plugin.nvml.types.GpuInfo fits)."""

    @property
    def index(self) -> int: ...

    @property
    def uuid(self) -> str: ...
