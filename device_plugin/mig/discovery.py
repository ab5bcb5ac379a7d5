"""Read a node's MIG state from an NVML backend into one frozen inventory.

Boundary: calls only gpus(), mig_mode() and mig_devices() of a backend (the MigBackend protocol,
which every NvmlBackend satisfies); no policy here. A GPU is "MIG-enabled" when its *current* mode
is enabled; a pending change (reset not yet done) is logged, not acted on: NVML reports the old mode
until the reset.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from device_plugin.nvml.mig_types import MigDevice, MigMode, mig_device_sort_key
from device_plugin.nvml.types import GpuInfo

log = logging.getLogger(__name__)


class MigBackend(Protocol):
    def gpus(self) -> tuple[GpuInfo, ...]: ...

    def mig_mode(self, index: int) -> MigMode | None: ...

    def mig_devices(self, index: int) -> tuple[MigDevice, ...]: ...


@dataclass(frozen=True)
class MigInventory:
    """What discovery saw. `devices_by_gpu` has a key for every GPU whose MIG mode is enabled
    now."""

    gpus: tuple[GpuInfo, ...]
    modes: Mapping[int, MigMode | None]
    devices_by_gpu: Mapping[int, tuple[MigDevice, ...]]


def discover(backend: MigBackend) -> MigInventory:
    gpus = backend.gpus()
    modes: dict[int, MigMode | None] = {}
    devices: dict[int, tuple[MigDevice, ...]] = {}
    for gpu in gpus:
        mode = backend.mig_mode(gpu.index)
        modes[gpu.index] = mode
        if mode is not None and mode.pending != mode.current:
            log.warning(
                "GPU %d (%s): MIG mode is %s but %s after the next GPU reset; advertising the "
                "current mode",
                gpu.index,
                gpu.uuid,
                "enabled" if mode.current else "disabled",
                "enabled" if mode.pending else "disabled",
            )
        if mode is not None and mode.current:
            devices[gpu.index] = tuple(
                sorted(backend.mig_devices(gpu.index), key=mig_device_sort_key)
            )
    return MigInventory(
        gpus=tuple(sorted(gpus, key=lambda g: g.index)),
        modes=MappingProxyType(modes),
        devices_by_gpu=MappingProxyType(devices),
    )
