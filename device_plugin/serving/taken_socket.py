"""Our socket's path served by another process: say so once, wait with backoff, never fight over it.

Two servers that each re-serve their socket when it is replaced would replace each other's for ever
(two device plugins on one directory did, every ~150 ms, and the kubelet talked to whichever bound
last). So before binding, the owner asks `taken()`: when a process accepts connections on the path
(and it is not ours: the owner has stopped its own server first), the owner leaves it alone, one
ERROR per episode names the likely causes, and `free_again()` is asked after each backoff delay
(`next_delay_s()`, growing to the backoff's maximum). A socket nobody accepts on (left by a process
that died) is not taken: it is replaced as before. `waiting()` says why nothing is served meanwhile,
for /readyz; liveness stays green (a restart would not help).

Boundary: the decision and its messages, for any of our sockets; the owner (dp_helper/lifecycle.py,
serving/kept_socket.py) binds or waits, socket_files connects to the path.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from device_plugin.core.backoff import Backoff, BackoffDelays
from device_plugin.serving.socket_files import served_by_someone

log = logging.getLogger(__name__)


class TakenSocket:
    def __init__(
        self, label: str, path: Path, backoff: Backoff, *, likely: str, remedy: str
    ) -> None:
        """`likely`: who the other process probably is; `remedy`: what the operator should do (both
        for the log)."""
        self._label = label
        self._path = path
        self._backoff = backoff
        self._likely = likely
        self._remedy = remedy
        self._delays: BackoffDelays = backoff.delays_s()
        self._lock = threading.Lock()
        self._waiting = False  # between taken() and the bind that follows free_again()
        self._announced = False  # the ERROR of this episode was logged

    def taken(self) -> bool:
        """Another process serves the path now (asked just before we bind). Logs the ERROR once an
        episode."""
        if not served_by_someone(self._path):
            return False
        with self._lock:
            announce, self._announced, self._waiting = not self._announced, True, True
            self._delays.reset()
        if announce:
            log.error(
                "%s: another process serves %s (%s); not taking it over: waiting until it is free "
                "(checked "
                "with backoff up to %.0f s), /readyz answers 503 meanwhile. %s",
                self._label,
                self._path,
                self._likely,
                self._backoff.max_s,
                self._remedy,
            )
        return True

    def next_delay_s(self) -> float:
        with self._lock:
            return next(self._delays)

    def free_again(self) -> bool:
        """Nobody serves the path any more (the other process stopped): bind it."""
        if served_by_someone(self._path):
            return False
        log.warning(
            "%s: %s is no longer served by another process; serving it", self._label, self._path
        )
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
        return (
            f"{self._path} is served by another process ({self._likely}?); waiting for it to be "
            "free"
        )
