"""The health of every device in our pool as the kubelet's DRAResourceHealth watchers read it.

Boundary: state and wake-ups only, no gRPC. The DRA front-end sets the whole list whenever the
runtime's one health delivery (node/health_routing.py -> DraFrontEnd.on_health) or a new inventory
changes it; each kubelet watcher (health_service.py, one stream each) takes the newest list when
woken. Wake-ups are coalesced: a watcher that was busy sending sees only the newest list, never a
queue, so a slow or stuck kubelet costs one list, not a backlog. Watchers run on the serving loop
(asyncio): set() is called from other threads and wakes them through their loop. At most
MAX_WATCHERS watch at once (the kubelet opens one per registration; more is someone else, refused by
the service).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from enum import Enum

MAX_WATCHERS = 8
MESSAGE_CHARS = 1024  # the kubelet cuts a longer message (v1 API)


class DeviceHealthStatus(Enum):
    UNKNOWN = 0  # the wire values of the API's HealthStatus enum
    HEALTHY = 1
    UNHEALTHY = 2


@dataclass(frozen=True)
class DeviceHealthReport:
    device_name: str
    status: DeviceHealthStatus
    message: str = ""  # why, when not Healthy (at most MESSAGE_CHARS)


def device_reports(
    devices: Iterable[tuple[str, int]], reasons: Mapping[int, str], *, checked: bool
) -> tuple[DeviceHealthReport, ...]:
    """Each (device name, GPU index): Unhealthy with its GPU's reason when in `reasons`, else
    Healthy; Unknown for all when health checks are off (`checked` False): nothing watches them."""
    if not checked:
        return tuple(
            DeviceHealthReport(n, DeviceHealthStatus.UNKNOWN, "health checks are disabled")
            for n, _ in devices
        )
    return tuple(
        DeviceHealthReport(n, DeviceHealthStatus.UNHEALTHY, reasons[g])
        if g in reasons
        else DeviceHealthReport(n, DeviceHealthStatus.HEALTHY)
        for n, g in devices
    )


class TooManyWatchers(RuntimeError):
    pass


class _Watcher:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.changed = asyncio.Event()

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop is closed: the stream is gone anyway
            self.loop.call_soon_threadsafe(self.changed.set)

    async def next_change(self, timeout_s: float) -> None:
        """Return when the list changed, or after `timeout_s` (the caller then sends it again
        anyway)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout_s)
        self.changed.clear()


class DeviceHealthFeed:
    def __init__(self, pool_name: str) -> None:
        self.pool_name = pool_name
        self._lock = threading.Lock()
        self._reports: tuple[DeviceHealthReport, ...] = ()
        self._watchers: set[_Watcher] = set()

    def set(self, reports: tuple[DeviceHealthReport, ...]) -> None:
        """The whole list, in listing order; every watcher is woken when it differs."""
        reports = tuple(replace(r, message=r.message[:MESSAGE_CHARS]) for r in reports)
        with self._lock:
            if reports == self._reports:
                return
            self._reports = reports
            watchers = list(self._watchers)
        for watcher in watchers:
            watcher.wake()

    def reports(self) -> tuple[DeviceHealthReport, ...]:
        return self._reports  # replaced whole, never changed in place

    def watcher_count(self) -> int:
        with self._lock:
            return len(self._watchers)

    @contextlib.contextmanager
    def watching(self) -> Iterator[_Watcher]:
        """A watcher on the running loop for the life of one stream. TooManyWatchers past
        MAX_WATCHERS."""
        watcher = _Watcher(asyncio.get_running_loop())
        with self._lock:
            if len(self._watchers) >= MAX_WATCHERS:
                raise TooManyWatchers(f"{MAX_WATCHERS} health watchers are connected already")
            self._watchers.add(watcher)
        try:
            yield watcher
        finally:
            with self._lock:
                self._watchers.discard(watcher)
