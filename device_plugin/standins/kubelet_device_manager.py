"""The kubelet stand-in's device manager: what each resource advertises, and what a stream's end
does to it.

Test harness, not part of the daemon. It models the kubelet's bookkeeping by resource name, for two
kubelet generations (docs/upgrade.md says which kubelets are which):
- every ListAndWatch message, from any live stream of a resource, replaces that resource's device
  set (the kubelet's update callback takes the resource name only), so an empty list from an old
  instance empties the resource even while a newer one serves it;
- a Register makes its connection the resource's endpoint (admissions go there) and clears a stop;
- kubelets before PR 135437 keep one client per resource name: when *any* stream of the resource
  ends, the resource is disconnected (its devices unhealthy, the current endpoint stopped) — issue
  121994;
- kubelets with PR 135437 (`clients_by_socket=True`) keep clients per (name, socket): only the end
  of the current endpoint's stream disconnects the resource; an older instance leaving changes
  nothing.

It also holds the kubelet's check of resource names (IsExtendedResourceName). Boundary: bookkeeping
only, under the stand-in's lock (the caller holds it); sockets and RPCs are standin.py's. A kubelet
restart starts a new generation: events from the old one are ignored.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection
from dataclasses import dataclass, field

HEALTHY = "Healthy"
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


def is_extended_resource_name(name: str) -> bool:
    """The kubelet's IsExtendedResourceName: `<dns-subdomain>/<name>`, not native, quota name
    valid."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, short = f"requests.{name}".partition("/")
    if "/" in short or not 0 < len(short) <= 63 or not _QUALIFIED_NAME.match(short):
        return False
    return len(prefix) <= 253 and all(_DNS_LABEL.match(label) for label in prefix.split("."))


class AdmissionRefused(RuntimeError):
    """The device manager refused a pod before any RPC, with the kubelet's own message."""


@dataclass
class _Resource:
    endpoint: object  # the connection admissions go to (the latest accepted registration)
    devices: dict[str, str] = field(default_factory=dict)  # id -> health, from the latest list
    stopped: bool = False  # PluginDisconnected: the endpoint is stopped until a new registration


class DeviceManagerModel:
    def __init__(self, *, clients_by_socket: bool) -> None:
        self.clients_by_socket = clients_by_socket
        self.generation = 0
        self._resources: dict[str, _Resource] = {}
        # (monotonic time, resource, healthy devices) at every change of a resource's healthy count
        self.history: list[tuple[float, str, int]] = []

    def reset(self) -> None:
        """A kubelet restart: nothing is registered; the old process's streams no longer count."""
        self.generation += 1
        names = list(self._resources)
        self._resources.clear()
        for name in names:
            self._record(name)

    def _record(self, resource: str) -> None:
        count = len(self.healthy(resource))
        last = next((c for _, r, c in reversed(self.history) if r == resource), None)
        if count != last:
            self.history.append((time.monotonic(), resource, count))

    def registered(self, resource: str, connection: object) -> None:
        entry = self._resources.get(resource)
        if entry is None:
            self._resources[resource] = _Resource(connection)
        else:
            entry.endpoint, entry.stopped = connection, False

    def listed(self, resource: str, devices: Collection[tuple[str, str]], generation: int) -> None:
        entry = self._resources.get(resource)
        if entry is not None and generation == self.generation:
            entry.devices = dict(devices)
            self._record(resource)

    def stream_ended(self, resource: str, connection: object, generation: int) -> None:
        entry = self._resources.get(resource)
        if entry is None or generation != self.generation:
            return
        if self.clients_by_socket and connection is not entry.endpoint:
            return  # an older instance's client goes; the current endpoint is untouched
        entry.devices = dict.fromkeys(entry.devices, "Unhealthy")
        entry.stopped = True
        self._record(resource)

    def healthy(self, resource: str) -> list[str]:
        entry = self._resources.get(resource)
        return (
            [] if entry is None else [i for i, health in entry.devices.items() if health == HEALTHY]
        )

    def endpoint_for_admission(
        self, resource: str, count: int, allocated: Collection[str]
    ) -> tuple[object, list[str]]:
        """The endpoint and the free healthy devices, or AdmissionRefused as the kubelet words
        it."""
        entry = self._resources.get(resource)
        if entry is None:
            raise AdmissionRefused(f"cannot allocate unregistered device {resource}")
        healthy = self.healthy(resource)
        if not healthy:
            raise AdmissionRefused(
                f"no healthy devices present; cannot allocate unhealthy devices {resource}"
            )
        available = [i for i in healthy if i not in allocated]
        if len(available) < count:
            raise AdmissionRefused(
                f"requested number of devices unavailable for {resource}. "
                f"Requested: {count}, Available: {len(available)}"
            )
        if entry.stopped:
            raise AdmissionRefused(
                f"endpoint {getattr(entry.endpoint, 'endpoint', '?')} has been stopped"
            )
        return entry.endpoint, available
