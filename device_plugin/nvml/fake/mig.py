"""MIG state of the fake NVML backend: a mixin that FakeNvml inherits, plus the layout -> device
mapping.

Each GPU's MIG layout starts as its machine description says (`mig:` key, validated by
device_plugin.nvml.fake.mig_description) and can be replaced at runtime with `set_mig_layout`, which
is what an operator's `nvidia-smi mig -dci/-dgi/-cgi` (or mig-manager) does on a real node;
re-discovery tests use it.

What the fake reports, and how it differs from a driver (nothing in the plugin relies on the
differences):
- MIG mode: None for a model without a profile table (NVML: NOT_SUPPORTED), else (enabled, pending);
- one compute instance per GPU instance, spanning it (compute instance id 0), as `-cgi ... -C`
  creates;
- GPU instance id = placement start + 1 (unique per GPU, as placements never overlap; drivers number
  them their own way, e.g. 7..14 for seven 1g instances on an A100);
- MIG UUID derived from (parent UUID, profile, start): an instance that survives a re-layout keeps
  its UUID, a re-created one at the same place gets the same UUID again (a driver would mint a new
  one);
- devices ordered by placement start (NVML's MIG device index order is the driver's).
"""

from __future__ import annotations

import threading
import uuid as uuid_lib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from device_plugin.nvml.fake.mig_description import MigLayout, build_layout
from device_plugin.nvml.mig_profiles import profile_table
from device_plugin.nvml.mig_types import MigDevice, MigMode

if TYPE_CHECKING:
    from device_plugin.nvml.fake.description import GpuDescription, MachineDescription

# fixed: UUIDs must be stable
_MIG_UUID_NAMESPACE = uuid_lib.UUID("3b0c6f2e-5d7a-4e61-9a2b-8c4d1e7f9a30")


def mig_uuid(parent_uuid: str, profile: str, start: int) -> str:
    return "MIG-" + str(
        uuid_lib.uuid5(_MIG_UUID_NAMESPACE, f"{parent_uuid.lower()}/{profile}/{start}")
    )


def initial_layout(gpu: GpuDescription) -> MigLayout | None:
    """The layout a GPU starts with; None for a GPU whose model cannot do MIG."""
    if gpu.mig is not None:
        return gpu.mig
    return None if profile_table(gpu.model) is None else MigLayout(enabled=False, pending=False)


def layout_devices(
    layout: MigLayout | None, parent_index: int, parent_uuid: str
) -> tuple[MigDevice, ...]:
    """The MIG devices NVML would list for a GPU in this layout (none unless MIG is currently
    enabled)."""
    if layout is None or not layout.enabled:
        return ()
    return tuple(
        MigDevice(
            uuid=mig_uuid(parent_uuid, placement.profile.name, placement.start),
            profile=placement.profile.name,
            memory_mib=placement.profile.memory_mib,
            multiprocessor_count=placement.profile.multiprocessor_count,
            parent_index=parent_index,
            parent_uuid=parent_uuid,
            gpu_instance_id=placement.start + 1,
            compute_instance_id=0,
            placement_start=placement.start,
            placement_size=placement.profile.memory_slices,
            slot=slot,  # the fake's driver fills slots in placement order
        )
        for slot, placement in enumerate(layout.placements)
    )


class FakeMigMixin:
    """MIG methods of FakeNvml. State lives in `_mig_layouts`, guarded by FakeNvml's `_lock`."""

    if TYPE_CHECKING:
        _lock: threading.RLock

        @property
        def description(self) -> MachineDescription: ...

        def _state(self, call: str, index: int) -> Any: ...

    _mig_layouts: dict[int, MigLayout | None]

    def _init_mig(self) -> None:
        self._mig_layouts = {gpu.index: initial_layout(gpu) for gpu in self.description.gpus}

    def mig_mode(self, index: int) -> MigMode | None:
        """nvmlDeviceGetMigMode: (current, pending), or None when the GPU cannot do MIG."""
        with self._lock:
            self._state("nvmlDeviceGetMigMode", index)
            layout = self._mig_layouts[index]
        return None if layout is None else MigMode(current=layout.enabled, pending=layout.pending)

    def mig_devices(self, index: int) -> tuple[MigDevice, ...]:
        """Every MIG device of GPU `index`, ordered by placement; empty unless MIG is currently
        enabled."""
        with self._lock:
            info = self._state("nvmlDeviceGetMigDeviceHandleByIndex", index).info
            layout = self._mig_layouts[index]
        return layout_devices(layout, index, info.uuid)

    def set_mig_layout(
        self,
        index: int,
        devices: Sequence[Mapping[str, object]],
        *,
        enabled: bool = True,
        pending: bool | None = None,
    ) -> tuple[MigDevice, ...]:
        """Replace GPU `index`'s MIG layout (entries as in the `mig.devices` schema); returns its
        new devices.

        An impossible layout raises MachineDescriptionError naming "gpus[<index>].mig.devices[...]"
        and leaves the old layout in place.
        """
        with self._lock:
            state = self._state("nvmlDeviceCreateGpuInstance", index)
            layout = build_layout(
                state.description.model,
                list(devices),
                f"gpus[{index}].mig",
                enabled=enabled,
                pending=pending,
            )
            self._mig_layouts[index] = layout
            return layout_devices(layout, index, state.info.uuid)
