"""What a published device is to the helper: a name, attributes, capacities and taints, as a driver
builds them.

Boundary: value types and the API's per-device limits only; which devices a node has, and which
taint a fault puts on them, is the driver's (device_plugin/dra/: inventory, taints). `slices` shapes
these into ResourceSlice objects; any frozen dataclass with these fields is a SliceDevice (the
driver's DraDevice is).
"""

from __future__ import annotations

from dataclasses import Field, dataclass
from typing import Any, ClassVar, Protocol

MAX_ATTRIBUTES_AND_CAPACITIES = 32  # the API's per-device limit

Attribute = tuple[str, str, int | str | bool]  # (name, kind: int|string|version|bool, value)

NO_SCHEDULE = "NoSchedule"
# informational (Kubernetes 1.35+); a consumer treats an effect it does not know like None
NONE = "None"
# what the scheduler will not allocate untolerated
BLOCKING_EFFECTS = frozenset({NO_SCHEDULE, "NoExecute"})


@dataclass(frozen=True)
class DeviceTaint:
    key: str
    value: str
    effect: str
    # RFC 3339 in whole seconds (UTC), as the API server stores it: we set it, it keeps it
    time_added: str

    @property
    def blocks_scheduling(self) -> bool:
        return self.effect in BLOCKING_EFFECTS

    def as_api(self) -> dict[str, str]:
        """The taint as `devices[].taints[]` holds it (value left out when empty)."""
        out = {"key": self.key, "effect": self.effect, "timeAdded": self.time_added}
        if self.value:
            out["value"] = self.value
        return out


@dataclass(frozen=True)
class RequestPolicy:
    """How the scheduler charges a share of a capacity (consumable capacity, Kubernetes 1.34+):
    `default_value` when a claim asks none, else the request rounded up to `min_value` + n * `step`
    (at most the capacity)."""

    default_value: str  # Kubernetes quantities, as the API takes them
    min_value: str
    step: str

    def as_api(self) -> dict[str, Any]:
        return {
            "default": self.default_value,
            "validRange": {"min": self.min_value, "step": self.step},
        }


class SliceDevice(Protocol):
    """A device as a ResourceSlice lists it; a frozen dataclass (a pool without taints is a
    `replace`)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def name(self) -> str: ...

    @property
    def attributes(self) -> tuple[Attribute, ...]: ...

    @property
    def capacity(self) -> tuple[tuple[str, str], ...]:  # (name, Kubernetes quantity)
        ...

    @property
    def taints(self) -> tuple[DeviceTaint, ...]: ...

    @property
    def request_policies(self) -> tuple[tuple[str, RequestPolicy], ...]:  # (capacity name, policy)
        ...

    @property
    # several claims may hold it (shares of its capacities)
    def allow_multiple_allocations(self) -> bool: ...
