"""Re-discovery: compare two advertised layouts and apply the difference to the running resources.

NVIDIA's plugin reads MIG only at start-up and leaves stale resources in node capacity after a
re-layout. Here a rescan (periodic, or on SIGHUP; the lifecycle owns the trigger) rebuilds the resources
with mig.strategy.build_resources and diffs them against what is served:
- appeared:    a new resource name (e.g. nvidia.com/mig-2g.20gb after a re-partition): start serving it;
- changed:     same name, different devices (IDs, parent GPUs or NUMA nodes): replace its device list;
- disappeared: the name is gone: its manager is closed, which sends the kubelet an EMPTY device list
               before the server stops, so no stale capacity remains (ResourceManager.close()).
Health is not part of a layout: a device that survives a rescan keeps the health it had.
Boundary: pure diff over Device values, plus `apply_diff` over anything with snapshot/replace/close.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from device_plugin.devices import Device, DeviceListSnapshot

log = logging.getLogger(__name__)

Layout = Mapping[str, tuple[Device, ...]]


@dataclass(frozen=True)
class LayoutDiff:
    appeared: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    disappeared: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.appeared or self.changed or self.disappeared)

    def describe(self) -> str:
        parts = [f"{label} {', '.join(names)}" for label, names in self._parts() if names]
        return "; ".join(parts) or "no change"

    def _parts(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return (("appeared:", self.appeared), ("changed:", self.changed), ("disappeared:", self.disappeared))


def _shape(devices: tuple[Device, ...]) -> frozenset[tuple[str, tuple[int, ...], int | None]]:
    return frozenset((d.id, d.gpu_indices, d.numa_node) for d in devices)


def diff_layouts(before: Layout, after: Layout) -> LayoutDiff:
    """Which resource names appeared, changed (device set), disappeared or stayed; each sorted."""
    names_before, names_after = set(before), set(after)
    common = names_before & names_after
    changed = sorted(n for n in common if _shape(before[n]) != _shape(after[n]))
    return LayoutDiff(
        appeared=tuple(sorted(names_after - names_before)),
        changed=tuple(changed),
        disappeared=tuple(sorted(names_before - names_after)),
        unchanged=tuple(sorted(common - set(changed))),
    )


def carry_health(current: tuple[Device, ...], fresh: tuple[Device, ...]) -> tuple[Device, ...]:
    """`fresh` devices, each keeping the health of the current device with the same ID."""
    health = {d.id: (d.health, d.health_reason) for d in current}
    return tuple(Device(d.id, d.gpu_indices, d.numa_node, *health[d.id]) if d.id in health else d for d in fresh)


class ManagedResource(Protocol):
    """What apply_diff needs of a served resource (device_plugin.resources.ResourceManager has it)."""

    def snapshot(self) -> DeviceListSnapshot: ...

    def replace_devices(self, devices: tuple[Device, ...]) -> None: ...

    def close(self) -> None: ...


M = TypeVar("M", bound=ManagedResource)


def apply_diff(
    diff: LayoutDiff,
    after: Layout,
    managers: MutableMapping[str, M],
    create: Callable[[str, tuple[Device, ...]], M],
) -> None:
    """Bring `managers` (resource name -> manager) to `after`: close gone ones first, then replace, then create.

    Closing first matters: a resource that disappears must advertise an empty list before anything else
    happens, and the caller stops its server after this returns.
    """
    for name in diff.disappeared:
        manager = managers.pop(name)
        manager.close()
        log.info("MIG re-discovery: %s disappeared; advertised an empty device list", name)
    for name in diff.changed:
        manager = managers[name]
        devices = carry_health(manager.snapshot().devices, after[name])
        manager.replace_devices(devices)
        log.info("MIG re-discovery: %s now has %d devices: %s", name, len(devices), ",".join(d.id for d in devices))
    for name in diff.appeared:
        managers[name] = create(name, after[name])
        log.info("MIG re-discovery: %s appeared with %d devices", name, len(after[name]))
