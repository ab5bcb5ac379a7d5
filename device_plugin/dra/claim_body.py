"""A ResourceClaim body, read defensively: this driver's allocated devices, or why the body cannot say.

Boundary: pure data in, frozen values out; no I/O. The body is whatever the API server (or whatever
answers in its place) sent, so any part may be missing, null, or of another type: a results item that
is a string, a `status` that is a string, `metadata` that is a list, `request: null`, a `device` that is
a list. Every shape ends in an Allocation or a ClaimBodyError whose message names the field (values
are quoted cut short); nothing else is raised, and the work is bounded (MAX_RESULTS items at most).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from device_plugin.core.short_text import short

RESULTS = "status.allocation.devices.results"
# The API allows 32 requests of at most 32 devices each; anything beyond that is not a real claim.
MAX_RESULTS = 32 * 32


class ClaimBodyError(ValueError):
    """The body does not have the shape of a ResourceClaim; the message names the field."""


@dataclass(frozen=True)
class AllocatedDevice:
    request: str  # the claim's request name ("<request>" of a firstAvailable "<request>/<subrequest>")
    pool: str
    device: str
    admin_access: bool  # the result's adminAccess: monitoring access beside the claim that owns the device


@dataclass(frozen=True)
class Allocation:
    uid: str  # metadata.uid ("" when the body has none)
    devices: tuple[AllocatedDevice, ...]  # this driver's results, in the claim's order


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _object(value: object, where: str, *, optional: bool = True) -> Mapping[str, Any]:
    """`value` as a JSON object; a missing (null) optional one is empty."""
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping):
        raise ClaimBodyError(f"{where} is a {_kind(value)} ({short(value)}), not an object")
    return value


def _text(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise ClaimBodyError(f"{where}.{key} is {short(value)} ({_kind(value)}), not a non-empty string")
    try:  # it goes into the answer's protobuf strings, which must be UTF-8 (a lone surrogate is not)
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ClaimBodyError(f"{where}.{key} is {short(value)}, not valid UTF-8") from None
    return value


def _device(item: Mapping[str, Any], where: str) -> AllocatedDevice:
    admin = item.get("adminAccess")
    if admin is not None and not isinstance(admin, bool):
        raise ClaimBodyError(f"{where}.adminAccess is {short(admin)} ({_kind(admin)}), not a boolean")
    return AllocatedDevice(
        _text(item, "request", where).split("/", 1)[0],
        _text(item, "pool", where),
        _text(item, "device", where),
        bool(admin),
    )


def read_allocation(body: object, driver: str) -> Allocation:
    """The claim's UID and `driver`'s allocated devices. ClaimBodyError: a part has the wrong shape."""
    claim = _object(body, "the ResourceClaim", optional=False)
    uid = _object(claim.get("metadata"), "metadata").get("uid", "")
    if not isinstance(uid, str):
        raise ClaimBodyError(f"metadata.uid is a {_kind(uid)} ({short(uid)}), not a string")
    status = _object(claim.get("status"), "status")
    allocation = _object(status.get("allocation"), "status.allocation")
    results = _object(allocation.get("devices"), "status.allocation.devices").get("results")
    if results is None:
        return Allocation(uid, ())
    if not isinstance(results, list):
        raise ClaimBodyError(f"{RESULTS} is a {_kind(results)} ({short(results)}), not a list")
    if len(results) > MAX_RESULTS:
        raise ClaimBodyError(f"{RESULTS} holds {len(results)} items, more than a claim can ({MAX_RESULTS})")
    devices = []
    for index, raw in enumerate(results):
        where = f"{RESULTS}[{index}]"
        item = _object(raw, where, optional=False)
        if _text(item, "driver", where) == driver:
            devices.append(_device(item, where))
    return Allocation(uid, tuple(devices))
