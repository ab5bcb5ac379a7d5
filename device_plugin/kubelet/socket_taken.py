"""Our socket's path served by another process: say so once, wait with backoff, never fight over it.

Two device plugins on one directory (NVIDIA's plugin still running, or a second copy of ours) would
each find its socket replaced by the other's and bind a fresh one, for ever, every ~150 ms: the kubelet
would talk to whichever bound last. Instead, before binding, the PluginManager asks `taken()`: when a
process accepts connections on the path and it is not ours, the manager leaves it alone (SOCKET_TAKEN),
logs one ERROR per episode naming the likely causes, and asks `free_again()` after each backoff delay
(growing to the backoff's maximum, 10 s by default). A socket nobody accepts on (left by a process that
died) is not taken: it is replaced as before. `waiting()` is what /readyz says meanwhile.

Boundary: the decision and its messages; the PluginManager moves the state, serving/socket_files.py
connects to the path.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from device_plugin.core.backoff import Backoff, BackoffDelays
from device_plugin.serving.socket_files import served_by_someone

log = logging.getLogger(__name__)


class TakenSocket:
    def __init__(self, resource_name: str, path: Path, backoff: Backoff) -> None:
        self._name = resource_name
        self._path = path
        self._backoff = backoff
        self._delays: BackoffDelays = backoff.delays_s()
        self._lock = threading.Lock()
        self._waiting = False  # between taken() and the bind that follows free_again()
        self._announced = False  # the ERROR of this episode was logged

    def taken(self) -> bool:
        """Another process serves the path now (checked just before we bind). Logs the ERROR once."""
        if not served_by_someone(self._path):
            return False
        with self._lock:
            announce, self._announced, self._waiting = not self._announced, True, True
            self._delays = self._backoff.delays_s()
        if announce:
            log.error(
                "%s: another process serves %s (NVIDIA's device plugin, or a second copy of this plugin on "
                "the same --device-plugin-dir); not taking it over: waiting until it is free (checked with "
                "backoff up to %.0f s), /readyz answers 503 meanwhile. Run one device plugin per node.",
                self._name,
                self._path,
                self._backoff.max_s,
            )
        return True

    def next_delay_s(self) -> float:
        with self._lock:
            return next(self._delays)

    def free_again(self) -> bool:
        """Nobody serves the path any more (the other process stopped): bind it."""
        if served_by_someone(self._path):
            return False
        log.warning("%s: %s is no longer served by another process; serving it", self._name, self._path)
        return True

    def bound(self) -> None:
        """Our socket is at the path: the episode is over; a later take-over is announced again."""
        with self._lock:
            self._waiting = self._announced = False

    def waiting(self) -> str:
        """Why we are not serving, for /readyz; "" while no other process holds the path."""
        with self._lock:
            waiting = self._waiting
        if not waiting:
            return ""
        return f"{self._path} is served by another process (NVIDIA's device plugin or a second copy?); waiting"
