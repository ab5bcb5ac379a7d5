"""The one place a kubelet request is checked: GetPreferredAllocation and Allocate, per container.

Boundary: the message itself (at least one container) is the helper's
(dp_helper/served_resource.py's require_containers); `validate_preferred` checks one
GetPreferredAllocation container and is the only way to build a ValidatedRequest (the constructor
refuses anything else), so an AllocationPolicy that receives one needs no checks of its own (the
allocator checks only that the GPU indices a policy derives make a request). `validate_allocate`
checks one Allocate container into a CheckedAllocation. ResourceManager calls these on every request
and nothing after them checks the request again; tests call them to build a policy's input the way
production does. Checks about a policy's device *kind* (whole GPUs for the topology policy) are made
when the resource is composed, not per request.

GetPreferredAllocation runs on the kubelet's admission path: validation is one pass over sets, IDs
are ordered by a precomputed rank (a dict lookup), and error text is built only when a request is
refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from device_plugin.core.devices import Device
from device_plugin.core.errors import InvalidRequestError, UnhealthyDeviceError, UnknownDeviceError
from device_plugin.core.short_text import bounded_ids

_SEAL = object()  # held only by validate_preferred


@dataclass(frozen=True, slots=True)
class ValidatedRequest:
    """One container's request, valid against `devices`.

    Guarantees: every ID is a key of `devices`; `available` has no duplicates and is in canonical
    order (device_sort_key); `must_include` is a duplicate-free subset of it, in the same order;
    len(must_include) <= size <= len(available) and size >= 1.
    """

    resource_name: str
    # the resource's devices when the request was checked (never mutated)
    devices: Mapping[str, Device]
    available: tuple[str, ...]
    must_include: tuple[str, ...]
    size: int
    _seal: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._seal is not _SEAL:
            raise TypeError("a ValidatedRequest is built by validate_preferred() only")


@dataclass(frozen=True, slots=True)
class CheckedAllocation:
    """One Allocate container, valid against the resource: known, healthy, distinct devices in
    canonical order."""

    resource_name: str
    devices: tuple[Device, ...]


def validate_preferred(
    resource_name: str,
    devices: Mapping[str, Device],
    rank: Mapping[str, int],
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
) -> ValidatedRequest:
    """Check one container's request; `rank` is each device ID's canonical position (same keys as
    `devices`).

    Raises InvalidRequestError (UnknownDeviceError for IDs the resource does not advertise) with a
    bounded message: a request may name thousands of IDs.
    """
    if size <= 0:
        raise InvalidRequestError(f"allocation_size must be positive, got {size}")
    unique_available = set(available)
    if len(unique_available) != len(available):
        raise InvalidRequestError("available_deviceIDs contains duplicates")
    if not unique_available <= rank.keys():
        unknown = sorted(unique_available - rank.keys())
        raise UnknownDeviceError(
            f"available_deviceIDs: unknown device(s) for {resource_name}: {bounded_ids(unknown)}"
        )
    must = set(must_include)
    if len(must) != len(must_include):
        raise InvalidRequestError("must_include_deviceIDs contains duplicates")
    if not must <= unique_available:
        outside = sorted(must - unique_available)
        raise InvalidRequestError(
            f"must_include_deviceIDs not in available_deviceIDs: {bounded_ids(outside)}"
        )
    if size > len(available):
        raise InvalidRequestError(
            f"allocation_size {size} exceeds the {len(available)} available devices"
        )
    if len(must) > size:
        raise InvalidRequestError(f"{len(must)} must_include devices exceed allocation_size {size}")
    ordered = tuple(sorted(unique_available, key=rank.__getitem__))
    must_ordered = tuple(sorted(must, key=rank.__getitem__)) if must else ()
    return ValidatedRequest(resource_name, devices, ordered, must_ordered, size, _SEAL)


def check_choice(request: ValidatedRequest, chosen: Sequence[str]) -> None:
    """A policy's answer must be `size` distinct available IDs holding every must_include ID.

    A policy bug must surface as an error, never as a wrong answer the kubelet would patch.
    """
    picked = set(chosen)
    size = request.size
    if (
        len(chosen) != size
        or len(picked) != size
        or not picked.issubset(request.available)
        or not picked.issuperset(request.must_include)
    ):
        raise RuntimeError(
            f"{request.resource_name}: allocation policy returned an invalid set {list(chosen)}"
        )


def validate_allocate(
    resource_name: str,
    devices: Mapping[str, Device],
    rank: Mapping[str, int],
    device_ids: Sequence[str],
) -> CheckedAllocation:
    """Check one Allocate container; `rank` as for validate_preferred.

    Raises InvalidRequestError (UnknownDeviceError, UnhealthyDeviceError for the two kinds the
    metrics tell apart) with a bounded message.
    """
    if not device_ids:
        raise InvalidRequestError("devices_ids is empty")
    unique = set(device_ids)
    if len(unique) != len(device_ids):
        raise InvalidRequestError(f"devices_ids contains duplicates: {bounded_ids(device_ids)}")
    if not unique <= rank.keys():
        unknown = sorted(unique - rank.keys())
        raise UnknownDeviceError(
            f"devices_ids: unknown device(s) for {resource_name}: {bounded_ids(unknown)}"
        )
    chosen = [devices[device_id] for device_id in sorted(unique, key=rank.__getitem__)]
    unhealthy = [d.id for d in chosen if not d.healthy]
    if unhealthy:
        raise UnhealthyDeviceError(
            f"devices_ids: unhealthy device(s) for {resource_name}: "
            f"{bounded_ids(sorted(unhealthy))}"
        )
    return CheckedAllocation(resource_name, tuple(chosen))
