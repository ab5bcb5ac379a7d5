"""The API stand-in's object rules: selectors, Status bodies, the APIGroup, and how device taints
are stored.

Pure functions on JSON-shaped dicts, no I/O; api_server applies them to what it is sent and answers.
"""

from __future__ import annotations

from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

GROUP = "resource.k8s.io"
# The Kubernetes release that introduced each served version: its schemas are the ones a write is
# checked against.
RELEASE_OF = {"v1": "1.34", "v1beta2": "1.33", "v1beta1": "1.32"}
# The API server's own limit (not in the OpenAPI schema): a slice with any tainted device holds at
# most 64.
MAX_DEVICES_WITH_TAINTS = 64


def field_of(obj: dict[str, Any], dotted: str) -> str:
    """The value at a dotted path ("spec.nodeName") as a field selector compares it; "" when
    absent."""
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part, {}) if isinstance(value, dict) else {}
    return "" if value == {} else str(value)


def matches(obj: dict[str, Any], fields: str, labels: str) -> bool:
    """Whether `obj` passes a fieldSelector (a=b,c=d) and an equality labelSelector."""
    for term in filter(None, fields.split(",")):
        key, _, want = term.partition("=")
        if field_of(obj, key) != want:
            return False
    held = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, labels.split(",")):
        key, _, want = term.partition("=")
        if held.get(key) != want:
            return False
    return True


def device_body(device: Any) -> dict[str, Any]:
    """Where a device's fields are: under `basic` in v1beta1, on the device from v1beta2 on."""
    if not isinstance(device, dict):
        return {}
    basic = device.get("basic")
    return basic if isinstance(basic, dict) else device


def taints_as_stored(spec: dict[str, Any], version: str, keeps_taints: bool) -> None:
    """Drop device taints (not kept, or v1beta1 of 1.32), else stamp a missing timeAdded, in
    place."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for device in spec.get("devices") or ():
        body = device_body(device)
        if "taints" not in body:
            continue
        if not keeps_taints or version == "v1beta1":
            del body["taints"]
            continue
        for taint in body["taints"] or ():
            if isinstance(taint, dict):
                taint.setdefault("timeAdded", now)


def too_many_tainted(spec: dict[str, Any]) -> str | None:
    """Why a slice breaks the 64-devices-with-taints rule; None when it does not."""
    devices = spec.get("devices") or ()
    tainted = [d for d in devices if device_body(d).get("taints")]
    if tainted and len(devices) > MAX_DEVICES_WITH_TAINTS:
        return f"spec.devices: at most {MAX_DEVICES_WITH_TAINTS} devices when any has taints"
    return None


def api_group(versions: tuple[str, ...]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": listed,
        "preferredVersion": listed[0] if listed else None,
    }


def status_body(
    code: int, message: str, reason: str = "", status: str = "Failure"
) -> dict[str, Any]:
    reason = reason or {404: "NotFound", 409: "Conflict", 422: "Invalid"}.get(
        code, HTTPStatus(code).phrase
    )
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": status,
        "message": message,
        "reason": reason,
        "code": code,
    }


def allocated_claim(
    namespace: str, name: str, uid: str, results: list[dict[str, Any]]
) -> dict[str, Any]:
    """A ResourceClaim as the scheduler leaves it for the kubelet: allocated `results` (each a
    request, driver, pool and device) and reserved for one pod (the kubelet prepares only claims a
    pod reserves)."""
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name, "uid": uid},
        "status": {
            "allocation": {"devices": {"results": results}},
            "reservedFor": [{"resource": "pods", "name": f"pod-{name}", "uid": f"pod-{uid}"}],
        },
    }
