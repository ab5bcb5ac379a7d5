"""ResourceManager: one advertised resource's devices and health, under one lock.

It validates kubelet requests against the current device list (both RPCs through
device_plugin.allocation.request, the one place a request is checked), delegates the choice to an
AllocationPolicy and the response to a ResponseBuilder, and wakes ListAndWatch streams (one
Condition) whenever the list changes. No gRPC here: the servicer translates.

The device dict is copy-on-write (a health change installs a new dict), so a request reads it under
the lock without copying; IDs keep their canonical rank (device_sort_key) from install time, so a
request's set is ordered by a dict lookup instead of sorting Device objects. GetPreferredAllocation
and Allocate run on the kubelet's admission path: validation is one pass, and log text (DEBUG) is
built only when used.
A request with no containers is a property of the wire message: the device-plugin helper refuses it
(dp_helper/served_resource.py). The helper serves a ResourceManager as its ServedResource.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence

from device_plugin.allocation.protocols import AllocationPolicy, ResponseBuilder, device_sort_key
from device_plugin.allocation.request import check_choice, validate_allocate, validate_preferred
from device_plugin.core.devices import ContainerAllocation, Device, DeviceListSnapshot, Health
from device_plugin.health.state import HealthTransition

log = logging.getLogger(__name__)


class ResourceManager:
    def __init__(
        self,
        resource_name: str,
        devices: Iterable[Device],
        policy: AllocationPolicy,
        response_builder: ResponseBuilder,
        *,
        is_mig: bool = False,
    ) -> None:
        self.resource_name = resource_name
        # its devices are MIG devices (composition decides, once, from the inventory)
        self.is_mig = is_mig
        self._policy = policy
        self._response_builder = response_builder
        self._changed = threading.Condition()
        self._devices: dict[str, Device] = {}
        self._rank: dict[str, int] = {}  # canonical position of each ID (health never changes it)
        self._version = 0
        self._closed = False
        self._install(devices)

    # ---- device list -------------------------------------------------------------------------

    def _install(self, devices: Iterable[Device]) -> None:
        ordered = sorted(devices, key=device_sort_key)
        ids = [d.id for d in ordered]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.resource_name}: duplicate device IDs in {ids}")
        self._devices = {d.id: d for d in ordered}
        self._rank = {device_id: rank for rank, device_id in enumerate(ids)}

    def snapshot(self) -> DeviceListSnapshot:
        with self._changed:
            return self._snapshot_locked()

    def _snapshot_locked(self) -> DeviceListSnapshot:
        devices = () if self._closed else tuple(self._devices.values())
        return DeviceListSnapshot(self._version, devices, closed=self._closed)

    def wait_for_change(self, after_version: int, timeout_s: float) -> DeviceListSnapshot:
        """The current snapshot once its version passes `after_version` (or on close/timeout)."""
        with self._changed:
            self._changed.wait_for(lambda: self._version > after_version or self._closed, timeout_s)
            return self._snapshot_locked()

    def _bump_locked(self) -> None:
        self._version += 1
        self._changed.notify_all()

    def close(self) -> None:
        """Advertise an empty list (so no stale capacity stays) and end every ListAndWatch
        stream."""
        with self._changed:
            self._closed = True
            self._bump_locked()

    @property
    def closed(self) -> bool:
        with self._changed:
            return self._closed

    # ---- health ------------------------------------------------------------------------------

    def on_health_transition(self, transition: HealthTransition) -> list[str]:
        """A HealthWatcher listener: apply a physical GPU's transition to its devices; returns
        changed IDs."""
        return self.set_gpu_health(transition.gpu_index, transition.after, transition.reason)

    def set_gpu_health(self, gpu_index: int, health: Health, reason: str) -> list[str]:
        """Set the health of every device backed by physical GPU `gpu_index`; returns changed
        IDs."""
        changed: list[tuple[Device, Device]] = []
        with self._changed:
            devices = dict(self._devices)  # copy-on-write: readers hold the old dict without a lock
            for device_id, device in devices.items():
                if gpu_index in device.gpu_indices and device.health is not health:
                    updated = Device(
                        device.id, device.gpu_indices, device.numa_node, health, reason
                    )
                    devices[device_id] = updated
                    changed.append((device, updated))
            if changed:
                self._devices = devices
                self._bump_locked()
        for before, after in changed:
            log.info(
                "%s: device %s %s -> %s (%s)",
                self.resource_name,
                after.id,
                before.health.value,
                after.health.value,
                reason,
            )
        return [after.id for _, after in changed]

    # ---- requests ----------------------------------------------------------------------------

    def _current(self) -> tuple[dict[str, Device], dict[str, int]]:
        with self._changed:
            return self._devices, self._rank  # never mutated in place (copy-on-write)

    def preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> tuple[str, ...]:
        devices, rank = self._current()
        request = validate_preferred(
            self.resource_name, devices, rank, available, must_include, size
        )
        chosen = self._policy.choose(request)
        check_choice(request, chosen)
        # The policy writes the decision's DEBUG line, with its reasons; this is the bare record.
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s: preferred %s for size %d from %d available (must include %s)",
                self.resource_name,
                ",".join(chosen),
                size,
                len(available),
                ",".join(request.must_include) or "-",
            )
        return chosen

    def allocate(self, device_ids: Sequence[str]) -> ContainerAllocation:
        devices, rank = self._current()
        request = validate_allocate(self.resource_name, devices, rank, device_ids)
        allocation = self._response_builder.build(request.devices)
        # on the kubelet's admission path: no INFO line per request
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s: allocated %s", self.resource_name, ",".join(d.id for d in request.devices)
            )
        return allocation
