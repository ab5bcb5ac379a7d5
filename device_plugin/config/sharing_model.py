"""Value types of the `sharing` section (time-slicing), after parsing and validation.

Boundary: plain frozen data. Parsing lives in config/sharing.py (when the config loads), resolving
GPU entries against the node in timeslice/config.py, building replicas in timeslice/replicas.py.
Placement is also the MIG policy's (mig/policy.py): one enum for
flags.plugin.sharedDevicesAllocationPolicy. Every spec keeps the dotted config path it came from
(`field`), so a fault found later (when the node's devices are known) still names the field the
operator has to fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

SHARED_SUFFIX = ".shared"  # renameByDefault appends it, as NVIDIA's plugin does


class Placement(StrEnum):
    """How a request's replicas (time-slicing) or MIG devices are spread over the devices and GPUs
    behind them."""

    DISTRIBUTED = "distributed"  # least-loaded devices first, one replica per device while possible
    PACKED = "packed"  # most-loaded devices first: keeps whole GPUs free for later requests


class SelectionKind(StrEnum):
    ALL = "all"
    COUNT = "count"
    LIST = "list"


@dataclass(frozen=True)
class SelectionEntry:
    """One element of a `devices` list: a physical GPU (by index or UUID) or a MIG UUID.

    As loaded, a GPU is named as written (`gpu_index` or `gpu_uuid`);
    timeslice.config.resolve_sharing checks both against the node and leaves every GPU as
    `gpu_index` (gpu_uuid None)."""

    field: str  # e.g. "sharing.timeSlicing.resources[0].devices[2]"
    gpu_index: int | None = None
    device_id: str | None = None  # a MIG device's UUID, matched against the resource's device IDs
    gpu_uuid: str | None = None  # a GPU UUID not yet resolved to its index (config as loaded)


@dataclass(frozen=True)
class DeviceSelection:
    """Which devices of a resource are shared: all, the first `count`, or the listed ones."""

    field: str  # "sharing.timeSlicing.resources[i].devices"
    kind: SelectionKind = SelectionKind.ALL
    count: int = 0
    entries: tuple[SelectionEntry, ...] = ()


@dataclass(frozen=True)
class SharedResourceSpec:
    """One `sharing.timeSlicing.resources[i]` entry, with the top-level defaults already applied."""

    field: str  # "sharing.timeSlicing.resources[i]"
    name: str  # the resource whose devices are shared, e.g. "nvidia.com/gpu"
    replicas: int
    advertised_name: str  # after `rename` / `renameByDefault`; equals `name` when not renamed
    devices: DeviceSelection
    placement: Placement
    require_distinct_gpus: bool
    fail_requests_greater_than_one: bool

    @property
    def renamed(self) -> bool:
        return self.advertised_name != self.name


@dataclass(frozen=True)
class TimeSlicingConfig:
    rename_by_default: bool
    fail_requests_greater_than_one: bool
    require_distinct_gpus: bool
    placement: Placement
    resources: tuple[SharedResourceSpec, ...]


@dataclass(frozen=True)
class SharingConfig:
    """The parsed `sharing` section. `time_slicing` is None when nothing is shared."""

    time_slicing: TimeSlicingConfig | None = None

    @property
    def strategy(self) -> str:
        """The value NVIDIA's GFD publishes as `<resource>.sharing-strategy` for shared
        resources."""
        return "time-slicing" if self.time_slicing is not None else "none"
