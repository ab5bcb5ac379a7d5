"""Resolve the parsed `sharing` section against this node's GPUs: the checks that need the GPUs.

Boundary: a SharingConfig (parsed when the config loads, device_plugin/config/sharing.py) and the
node's GPUs in, the same SharingConfig with every GPU of a `devices` list named by its index out, or
a ConfigError naming the dotted field. Checked here: a GPU index exists, a GPU UUID belongs to a GPU
of this node, and no entry selects the same device as an earlier one. Nothing here knows about NVML,
gRPC or files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from device_plugin.config.sharing import MPS_NOT_SUPPORTED
from device_plugin.config.sharing_model import (
    DeviceSelection,
    SelectionEntry,
    SelectionKind,
    SharingConfig,
)
from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import short

__all__ = ["MPS_NOT_SUPPORTED", "GpuRef", "resolve_sharing"]


class GpuRef(Protocol):
    """What resolving `devices` entries needs to know about a GPU (device_plugin.nvml.types.GpuInfo
    fits)."""

    @property
    def index(self) -> int: ...

    @property
    def uuid(self) -> str: ...


def resolve_sharing(sharing: SharingConfig, gpus: Sequence[GpuRef]) -> SharingConfig:
    """`sharing` with its `devices` lists checked against `gpus` and every GPU named by index."""
    time_slicing = sharing.time_slicing
    if time_slicing is None:
        return sharing
    resources = tuple(
        replace(spec, devices=_resolve(spec.devices, gpus)) for spec in time_slicing.resources
    )
    return replace(sharing, time_slicing=replace(time_slicing, resources=resources))


def _resolve(selection: DeviceSelection, gpus: Sequence[GpuRef]) -> DeviceSelection:
    if selection.kind is not SelectionKind.LIST:
        return selection
    by_index = {gpu.index: gpu for gpu in gpus}
    by_uuid = {gpu.uuid: gpu.index for gpu in gpus}
    known = ", ".join(str(i) for i in sorted(by_index)) or "none"
    entries: list[SelectionEntry] = []
    for entry in selection.entries:
        if entry.gpu_uuid is not None:
            if entry.gpu_uuid not in by_uuid:
                message = (
                    f"{short(entry.gpu_uuid)} is neither a GPU index nor the UUID of a GPU on this "
                    "node"
                )
                raise ConfigError(entry.field, message)
            entry = SelectionEntry(entry.field, gpu_index=by_uuid[entry.gpu_uuid])
        elif entry.gpu_index is not None and entry.gpu_index not in by_index:
            message = f"no GPU with index {entry.gpu_index} on this node (GPU indices: {known})"
            raise ConfigError(entry.field, message)
        entries.append(entry)
    keys = [(e.gpu_index, e.device_id) for e in entries]
    for i, key in enumerate(keys):
        if key in keys[:i]:
            raise ConfigError(
                entries[i].field, f"selects the same device as {entries[keys.index(key)].field}"
            )
    return replace(selection, entries=tuple(entries))
