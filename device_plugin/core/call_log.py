"""One INFO line per kubelet call (Allocate, GetPreferredAllocation, NodePrepareResources, ...),
rate-limited.

An operator must see what was handed out without DEBUG, but a storm of calls (a crash-looping pod, a
kubelet retrying) must not flood the log. A token bucket: `burst` lines at once, then `per_s` a
second; the lines held back are counted, and the next line that goes out says how many were held
back and over how long. Thread-safe; the clock is injected for the tests. Used by both modes, one
instance per caller.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

BURST = 20  # lines at once: a node's pods starting together are all seen
PER_S = 5.0  # then this many a second, the rest counted


class CallLog:
    def __init__(
        self,
        logger: logging.Logger,
        *,
        burst: int = BURST,
        per_s: float = PER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._burst = float(burst)
        self._per_s = per_s
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()
        self._held = 0
        self._held_since = 0.0
        self._lock = threading.Lock()

    @property
    def held_back(self) -> int:
        """Lines held back since the last one that went out."""
        return self._held

    def info(self, message: str, *args: object) -> bool:
        """Log `message % args` at INFO if the bucket allows; False when held back (counted)."""
        if not self._log.isEnabledFor(logging.INFO):
            return False
        with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._per_s)
            self._stamp = now
            if self._tokens < 1.0:
                if self._held == 0:
                    self._held_since = now
                self._held += 1
                return False
            self._tokens -= 1.0
            held, since = self._held, self._held_since
            self._held = 0
        if held:
            message = f"{message} ({held} such lines held back over the last %.1f s)"
            args = (*args, now - since)
        self._log.info(message, *args)
        return True
