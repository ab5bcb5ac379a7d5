"""What the device-plugin helper serves: one resource's device list and its two decisions.

Boundary: a Protocol, and the one check of a request message the helper makes itself; no GPU
knowledge. The front-end (device_plugin/dp/) hands the helper allocation/'s ResourceManager, which
fits: its devices and their health, the preferred set (GetPreferredAllocation) and the Allocate
answer are decided there; the helper serves them over the kubelet's v1beta1 API (servicer.py) and
keeps the socket registered (lifecycle.py).
"""

from __future__ import annotations

from collections.abc import Sequence, Sized
from typing import Protocol

from device_plugin.core.devices import ContainerAllocation, DeviceListSnapshot
from device_plugin.core.errors import InvalidRequestError


class ServedResource(Protocol):
    resource_name: str

    def snapshot(self) -> DeviceListSnapshot:
        """The device list now (ListAndWatch's first message)."""
        ...

    def wait_for_change(self, after_version: int, timeout_s: float) -> DeviceListSnapshot:
        """The list once its version passes `after_version`, or the current one after
        `timeout_s`."""
        ...

    def preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> tuple[str, ...]:
        """GetPreferredAllocation for one container. InvalidRequestError: a bad request."""
        ...

    def allocate(self, device_ids: Sequence[str]) -> ContainerAllocation:
        """Allocate for one container. InvalidRequestError: a bad request."""
        ...

    def close(self) -> None:
        """The resource goes away: ListAndWatch streams get the empty list and end."""
        ...


def require_containers(containers: Sized) -> None:
    """A request with no containers asks for nothing: refused (both RPCs)."""
    if not len(containers):
        raise InvalidRequestError("container_requests is empty")
