"""A claim as the helper sees it: the kubelet's reference, one read of its ResourceClaim, the
allocation in the body, what a Prepare answers; and the fetcher the Preparer reads through.

Boundary: value types and pure data in, frozen values out; no I/O. The body is whatever the API
server (or whatever answers in its place) sent, so any part may be missing, null, or of another
type: a results item that is a string, a `status` that is a string, `metadata` that is a list,
`request: null`, a `device` that is a list. Every shape ends in an Allocation or a ClaimBodyError
whose message names the field (values are quoted cut short); nothing else is raised, and the work is
bounded (MAX_RESULTS items at most). How the values are used: claims/prepare.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from device_plugin.core.short_text import short
from device_plugin.dra_helper.checkpoint.values import PreparedDevice

MAX_NAMESPACE_CHARS, MAX_NAME_CHARS = 63, 253
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# The API allows 32 requests of at most 32 devices each; anything beyond that is not a real claim.
MAX_RESULTS = 32 * 32
MAX_REQUESTS = 32  # of a claim, and alternatives of one request (the API allows 32 and 8)
MAX_CAPACITIES = 32  # a device has at most 32 attributes and capacities


class ClaimBodyError(ValueError):
    """The body does not have the shape of a ResourceClaim; the message names the field."""


@dataclass(frozen=True)
class AllocatedDevice:
    # the claim's request name ("<request>" of a firstAvailable "<request>/<subrequest>")
    request: str
    pool: str
    device: str
    # the result's adminAccess: monitoring access beside the claim that owns the device
    admin_access: bool
    share_id: str = ""  # the result's shareID: one share of a device several claims may hold
    consumed: tuple[tuple[str, str], ...] = ()  # the result's consumedCapacity: (name, quantity)
    asked: tuple[tuple[str, str], ...] = ()  # its request's capacity.requests: (name, quantity)


@dataclass(frozen=True)
class Allocation:
    uid: str  # metadata.uid ("" when the body has none)
    devices: tuple[AllocatedDevice, ...]  # this driver's results, in the claim's order


def kind_of(value: object) -> str:
    return "null" if value is None else type(value).__name__


def json_object(value: object, where: str, *, optional: bool = True) -> Mapping[str, Any]:
    """`value` as a JSON object; a missing (null) optional one is empty."""
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping):
        raise ClaimBodyError(f"{where} is a {kind_of(value)} ({short(value)}), not an object")
    return value


def text_field(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise ClaimBodyError(
            f"{where}.{key} is {short(value)} ({kind_of(value)}), not a non-empty string"
        )
    # it goes into the answer's protobuf strings, which must be UTF-8 (a lone surrogate is not)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ClaimBodyError(f"{where}.{key} is {short(value)}, not valid UTF-8") from None
    return value


def _device(
    item: Mapping[str, Any], where: str, asked: Mapping[str, tuple[tuple[str, str], ...]]
) -> AllocatedDevice:
    admin = item.get("adminAccess")
    if admin is not None and not isinstance(admin, bool):
        raise ClaimBodyError(
            f"{where}.adminAccess is {short(admin)} ({kind_of(admin)}), not a boolean"
        )
    request = text_field(item, "request", where)
    share = item.get("shareID")
    return AllocatedDevice(
        request.split("/", 1)[0],
        text_field(item, "pool", where),
        text_field(item, "device", where),
        bool(admin),
        "" if share is None else text_field(item, "shareID", where),
        quantities(item.get("consumedCapacity"), f"{where}.consumedCapacity"),
        asked.get(request, ()),
    )


def quantities(value: object, where: str) -> tuple[tuple[str, str], ...]:
    """A map of capacity name -> quantity string (none when absent), sorted by name."""
    found = json_object(value, where)
    if len(found) > MAX_CAPACITIES:
        raise ClaimBodyError(
            f"{where} holds {len(found)} entries, more than a device can have ({MAX_CAPACITIES})"
        )
    return tuple(sorted((str(name), text_field(found, name, where)) for name in found))


def _asked(claim: Mapping[str, Any]) -> dict[str, tuple[tuple[str, str], ...]]:
    """Request name ("<request>" or "<request>/<subrequest>") -> its capacity.requests, for those
    that ask."""
    spec = json_object(json_object(claim.get("spec"), "spec").get("devices"), "spec.devices")
    requests = spec.get("requests")
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    if not isinstance(requests, list):
        return out
    for i, raw in enumerate(requests[:MAX_REQUESTS]):
        request = json_object(raw, f"spec.devices.requests[{i}]", optional=False)
        name = request.get("name")
        if not isinstance(name, str):
            continue
        exactly = json_object(request.get("exactly"), f"spec.devices.requests[{i}].exactly")
        options = [(name, exactly)] if exactly else []
        alternatives = request.get("firstAvailable")
        if isinstance(alternatives, list):
            options += [
                (f"{name}/{sub.get('name')}", sub)
                for sub in alternatives[:MAX_REQUESTS]
                if isinstance(sub, Mapping) and isinstance(sub.get("name"), str)
            ]
        for full, body in options:
            capacity = json_object(body.get("capacity"), f"{full}.capacity")
            asked = quantities(capacity.get("requests"), f"request {full}: capacity.requests")
            if asked:
                out[full] = asked
    return out


def allocation_items(
    claim: Mapping[str, Any], key: str, limit: int
) -> list[tuple[str, Mapping[str, Any]]]:
    """The objects of `status.allocation.devices.<key>` (none when absent), each with the name a
    message gives it. ClaimBodyError: a part has the wrong shape, or the list holds more than
    `limit` items."""
    status = json_object(claim.get("status"), "status")
    allocation = json_object(status.get("allocation"), "status.allocation")
    items = json_object(allocation.get("devices"), "status.allocation.devices").get(key)
    field = f"status.allocation.devices.{key}"
    if items is None:
        return []
    if not isinstance(items, list):
        raise ClaimBodyError(f"{field} is a {kind_of(items)} ({short(items)}), not a list")
    if len(items) > limit:
        raise ClaimBodyError(f"{field} holds {len(items)} items, more than a claim can ({limit})")
    return [
        (f"{field}[{i}]", json_object(raw, f"{field}[{i}]", optional=False))
        for i, raw in enumerate(items)
    ]


def read_allocation(body: object, driver: str) -> Allocation:
    """The claim's UID and `driver`'s allocated devices. ClaimBodyError: a part has the wrong
    shape."""
    claim = json_object(body, "the ResourceClaim", optional=False)
    uid = json_object(claim.get("metadata"), "metadata").get("uid", "")
    if not isinstance(uid, str):
        raise ClaimBodyError(f"metadata.uid is a {kind_of(uid)} ({short(uid)}), not a string")
    items = [
        (w, i)
        for w, i in allocation_items(claim, "results", MAX_RESULTS)
        if text_field(i, "driver", w) == driver
    ]
    asked = _asked(claim) if items else {}
    devices = [_device(item, where, asked) for where, item in items]
    return Allocation(uid, tuple(devices))


class ClaimFetcher(Protocol):
    async def fetch_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The ResourceClaim object as a dict, or None when it does not exist (404). Awaited on the
        loop."""
        ...


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    uid: str
    name: str


@dataclass(frozen=True)
class ClaimRead:
    """What reading one ResourceClaim gave: its body (None: there is no such claim), or why it
    failed."""

    body: Mapping[str, Any] | None = None
    failure: str = ""  # "" when the read did not fail


@dataclass(frozen=True)
class PrepareResult:
    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


def check_claim_name(namespace: str, name: str) -> None:
    """ValueError (short) unless `namespace` is a DNS label and `name` a DNS subdomain, as the API
    server requires: a name from the kubelet's request goes into a URL only when an object can have
    it."""
    if len(namespace) > MAX_NAMESPACE_CHARS or not _DNS_LABEL.fullmatch(namespace):
        raise ValueError(
            f"namespace {short(namespace)} is not a valid namespace name (a DNS label)"
        )
    if len(name) > MAX_NAME_CHARS or not _DNS_SUBDOMAIN.fullmatch(name):
        raise ValueError(
            f"name {short(name)} is not a valid object name (a DNS subdomain of at most 253 "
            "characters)"
        )
