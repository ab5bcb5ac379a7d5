"""What the scheduler can allocate from a pool: the devices of its newest generation that no taint blocks.

The scheduler's allocator (k8s.io/dynamic-resource-allocation/structured) ignores slices of an older pool
generation, and with device taints (KEP-5055) it skips a device carrying a NoSchedule or NoExecute taint
that the claim does not tolerate (an effect it does not know counts as None, which blocks nothing). The
claims here tolerate nothing. Slices are taken in name order (1.36+), devices in listing order.
"""

from __future__ import annotations

from typing import Any

BLOCKING = frozenset({"NoSchedule", "NoExecute"})


def _body(device: dict[str, Any]) -> dict[str, Any]:
    return device.get("basic", device)  # v1beta1 nests a device's fields under `basic`


def newest_devices(slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every device of the pool's newest generation, slices in name order."""
    if not slices:
        return []
    newest = max(s["spec"]["pool"]["generation"] for s in slices)
    current = sorted(
        (s for s in slices if s["spec"]["pool"]["generation"] == newest), key=lambda s: s["metadata"]["name"]
    )
    return [d for s in current for d in s["spec"]["devices"]]


def blocked(device: dict[str, Any]) -> bool:
    return any(t.get("effect") in BLOCKING for t in _body(device).get("taints") or ())


def schedulable(slices: list[dict[str, Any]]) -> list[str]:
    """The names of the devices a claim that tolerates no taint can get, in the allocator's order."""
    return [d["name"] for d in newest_devices(slices) if not blocked(d)]


def taints_of(slices: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Device name -> its taints, for the devices that carry any."""
    return {d["name"]: _body(d)["taints"] for d in newest_devices(slices) if _body(d).get("taints")}
