"""Keeping each published device within the API's 32 attributes and capacities, degrading rather
than failing.

Boundary: pure, over the inventory's devices. The shipped machines publish at most 28 by design
(inventory.py), but a real node may report more (another NIC fact, a clique, a future attribute):
one device over the limit would make the API server refuse the whole pool, and the node would
publish nothing. So where a device is over the limit, the least needed attributes are dropped, in
DROP_ORDER (the hints a shipped claim reads last, or none reads), and the caller says so: a WARNING
naming the device and what was dropped, and a metric. What a DeviceClass or an example claim reads
without a fallback (`type`, `uuid`, `profile`, ...) is never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from device_plugin.dra.inventory import DraDevice
from device_plugin.dra_helper.api.devices import MAX_ATTRIBUTES_AND_CAPACITIES

# Least needed first, by name without the domain (ours) or as published (NVIDIA's, the standard
# ones).
DROP_ORDER = (
    "nearestNIC", "clique", "nvlinkDomain", "bestSet16", "rankedSet4F", "rankedSet4E",
    "rankedSet2D",
    "rankedSet4D", "rankedSet2C", "rankedSet4C", "rankedSet2B", "rankedSet4B", "minor", "index",
    "cudaDriverVersion", "resource.kubernetes.io/pciBusID", "bestSet8", "bestSet4",
)  # fmt: skip


def _short(name: str) -> str:
    return name if name.startswith("resource.kubernetes.io/") else name.rsplit("/", 1)[-1]


def within_limit(
    devices: Sequence[DraDevice], limit: int = MAX_ATTRIBUTES_AND_CAPACITIES
) -> tuple[tuple[DraDevice, ...], dict[str, tuple[str, ...]]]:
    """The devices within `limit`, and for each one that was not, the attributes dropped (full
    names)."""
    out, dropped = [], {}
    for device in devices:
        over = len(device.attributes) + len(device.capacity) - limit
        if over <= 0:
            out.append(device)
            continue
        names = {_short(n): n for n, _, _ in device.attributes}
        gone = [names[d] for d in DROP_ORDER if d in names][:over]
        kept = tuple(a for a in device.attributes if a[0] not in gone)
        out.append(replace(device, attributes=kept))
        dropped[device.name] = tuple(gone)
    return tuple(out), dropped
