"""What the API server holds of our pool against what we wrote: pure comparisons of slice dicts.

Boundary: no I/O; the publisher (dra_helper/api/publisher.py) decides what to do with the answers.
A pool is in sync when the server holds exactly our slices (names, specs, owner); a write's answer
is the object as stored, so a spec other than the one sent means the server changed or kept
something. Device taints are compared apart: a server with the DRADeviceTaints gate off drops them
on write, which is a known behaviour to fall back from, not a failed write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def generation_of(obj: Mapping[str, Any]) -> int:
    """The pool generation a listed slice carries; 0 when it carries none (it is rewritten then)."""
    pool = obj["spec"].get("pool")
    generation = pool.get("generation") if isinstance(pool, dict) else None
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else 0


def same_pool(existing: Mapping[str, Mapping[str, Any]], desired: list[dict[str, Any]]) -> bool:
    """The server holds exactly these slices: same names, specs and owner."""
    if set(existing) != {o["metadata"]["name"] for o in desired}:
        return False
    for obj in desired:
        held = existing[obj["metadata"]["name"]]
        owners = held.get("metadata", {}).get("ownerReferences")
        if held.get("spec") != obj["spec"] or owners != obj["metadata"].get("ownerReferences"):
            return False
    return True


def held_summary(held: Mapping[str, Mapping[str, Any]], desired: list[dict[str, Any]]) -> str:
    """What differs, slice by slice, for /readyz: missing, at another generation, or another
    content."""
    parts = []
    for obj in desired:
        name = obj["metadata"]["name"]
        there = held.get(name)
        if there is None:
            parts.append(f"{name} missing")
        elif generation_of(there) != obj["spec"]["pool"]["generation"]:
            parts.append(f"{name} at generation {generation_of(there)}")
        elif there.get("spec") != obj["spec"]:
            parts.append(f"{name} with another spec")
    wanted = {o["metadata"]["name"] for o in desired}
    parts += [f"{name} (stale)" for name in sorted(set(held) - wanted)]
    return ", ".join(parts) or "the slices with another owner"


def taints_dropped(sent: Mapping[str, Any], stored: object) -> bool:
    """We sent device taints and the stored object holds fewer (the server does not keep the
    field)."""
    if not isinstance(stored, dict) or not isinstance(stored.get("spec"), dict):
        return False
    return taint_count(sent["spec"]) > taint_count(stored["spec"])


def taint_count(spec: Mapping[str, Any]) -> int:
    count = 0
    for device in spec.get("devices") or ():
        # v1beta1 nests under `basic`
        body = device.get("basic", device) if isinstance(device, dict) else {}
        taints = body.get("taints") if isinstance(body, dict) else None
        count += len(taints) if isinstance(taints, list) else 0
    return count


def without_taints(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a slice spec whose devices carry no taints (the rest shared, not copied)."""
    devices = []
    for device in spec.get("devices") or ():
        if isinstance(device, dict) and isinstance(device.get("basic"), dict):
            basic = {k: v for k, v in device["basic"].items() if k != "taints"}
            devices.append({**device, "basic": basic})  # v1beta1
        elif isinstance(device, dict):
            devices.append({k: v for k, v in device.items() if k != "taints"})
        else:
            devices.append(device)
    return {**spec, "devices": devices}
