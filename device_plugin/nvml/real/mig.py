"""MIG discovery over NVML for the real backend. Reads MIG state only; never creates or destroys
anything.

It does not import pynvml: RealNvml passes its choke point `call(function, *args, device=...)`,
which raises NvmlError with NVML's return code, so every NVML call still goes through that one
place.

Per MIG-enabled GPU: nvmlDeviceGetMaxMigDeviceCount, then for each slot
nvmlDeviceGetMigDeviceHandleByIndex (NOT_FOUND: an empty slot), and per MIG device GetUUID,
GetAttributes (SMs, GI/CI slice counts, memory), GetGpuInstanceId, GetComputeInstanceId, and the GPU
instance's placement and profile id through nvmlDeviceGetGpuInstanceById(parent, id) +
nvmlGpuInstanceGetInfo.

Profile names are built the way NVIDIA's tools name them, from what NVML reports:
- "<g>g" from the GI slice count, with a "<c>c." prefix when the compute instance is smaller than
  its GI;
- "<N>gb" from the GI memory as a fraction of the GPU's (mig_profiles.memory_gb_for_name);
- "+me" when the GI's profile id is the id NVML gives the media-extension profiles (1_SLICE_REV1 /
  2_SLICE_REV1) on this GPU (nvmlDeviceGetGpuInstanceProfileInfo).
Where the driver withholds GPU-instance details (NO_PERMISSION in an unprivileged container, or
NOT_SUPPORTED), placement_start and placement_size are -1 and no "+me" can be told; the rest stands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from device_plugin.core.errors import NvmlError
from device_plugin.nvml.mig_profiles import (
    GI_1_SLICE_REV1,
    GI_2_SLICE_REV1,
    memory_gb_for_name,
    profile_name,
)
from device_plugin.nvml.mig_types import MigDevice, MigMode, mig_device_sort_key
from device_plugin.nvml.types import GpuInfo

log = logging.getLogger(__name__)

# RealNvml._call: (function, *args, device=...) -> result, raising NvmlError
Call = Callable[..., Any]

# NVML return codes (C ABI).
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_DEVICE_MIG_ENABLE = 1
_CANNOT_TELL = frozenset({NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND})
_WITHHELD = frozenset(
    {NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION, NVML_ERROR_FUNCTION_NOT_FOUND}
)


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def read_mig_mode(call: Call, handle: Any, where: str) -> MigMode | None:
    """(current, pending) MIG mode; None when the GPU (or driver) does not support MIG."""
    try:
        current, pending = call("nvmlDeviceGetMigMode", handle, device=where)
    except NvmlError as exc:
        if exc.code in _CANNOT_TELL:
            return None
        raise
    return MigMode(
        current=int(current) == NVML_DEVICE_MIG_ENABLE,
        pending=int(pending) == NVML_DEVICE_MIG_ENABLE,
    )


def read_mig_devices(call: Call, handle: Any, parent: GpuInfo) -> tuple[MigDevice, ...]:
    """Every MIG device of `parent` (whose NVML handle is `handle`); empty unless MIG is enabled
    now."""
    where = f"GPU {parent.index}"
    mode = read_mig_mode(call, handle, where)
    if mode is None or not mode.current:
        return ()
    slots = int(call("nvmlDeviceGetMaxMigDeviceCount", handle, device=where))
    me_ids = _media_extension_profile_ids(call, handle, where)
    devices = []
    for slot in range(slots):
        try:
            mig = call(
                "nvmlDeviceGetMigDeviceHandleByIndex",
                handle,
                slot,
                device=f"{where} MIG slot {slot}",
            )
        except NvmlError as exc:
            if exc.code == NVML_ERROR_NOT_FOUND:
                continue  # no MIG device in this slot
            raise
        devices.append(_read_one(call, handle, mig, parent, slot, me_ids))
    return tuple(sorted(devices, key=mig_device_sort_key))


def _read_one(
    call: Call, parent_handle: Any, mig: Any, parent: GpuInfo, slot: int, me_ids: frozenset[int]
) -> MigDevice:
    where = f"GPU {parent.index} MIG slot {slot}"
    uuid = _text(call("nvmlDeviceGetUUID", mig, device=where))
    attributes = call("nvmlDeviceGetAttributes", mig, device=where)
    gi_id = int(call("nvmlDeviceGetGpuInstanceId", mig, device=where))
    ci_id = int(call("nvmlDeviceGetComputeInstanceId", mig, device=where))
    start, size, profile_id = -1, -1, None
    try:
        instance = call(
            "nvmlDeviceGetGpuInstanceById", parent_handle, gi_id, device=f"{where} GI {gi_id}"
        )
        info = call("nvmlGpuInstanceGetInfo", instance, device=f"{where} GI {gi_id}")
        start, size, profile_id = (
            int(info.placement.start),
            int(info.placement.size),
            int(info.profileId),
        )
    except NvmlError as exc:
        if exc.code not in _WITHHELD:
            raise
        log.info(
            "%s: GPU instance %d details withheld by the driver (%s); placement unknown",
            where,
            gi_id,
            exc,
        )
    gi_slices = int(attributes.gpuInstanceSliceCount)
    memory_mib = int(attributes.memorySizeMB)
    name = profile_name(
        gi_slices,
        memory_gb_for_name(memory_mib, parent.memory_mib),
        compute_slices=int(attributes.computeInstanceSliceCount),
        media_extensions=profile_id is not None and profile_id in me_ids,
    )
    return MigDevice(
        uuid=uuid,
        profile=name,
        memory_mib=memory_mib,
        multiprocessor_count=int(attributes.multiprocessorCount),
        parent_index=parent.index,
        parent_uuid=parent.uuid,
        gpu_instance_id=gi_id,
        compute_instance_id=ci_id,
        placement_start=start,
        placement_size=size,
        slot=slot,
    )


def _media_extension_profile_ids(call: Call, handle: Any, where: str) -> frozenset[int]:
    """The GI profile ids this GPU gives its "+me" profiles (profiles it lacks are skipped)."""
    ids = set()
    for profile in (GI_1_SLICE_REV1, GI_2_SLICE_REV1):
        try:
            ids.add(
                int(call("nvmlDeviceGetGpuInstanceProfileInfo", handle, profile, device=where).id)
            )
        except NvmlError as exc:
            # 2: INVALID_ARGUMENT, profile unknown to this GPU
            if exc.code not in _WITHHELD and exc.code != 2:
                raise
    return frozenset(ids)
