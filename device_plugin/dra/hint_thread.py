"""The thread that recomputes the hints which follow the GPUs in use, off the prepare path.

Boundary: when the recomputation runs, never what it computes (front_end.py hands it the work, which
asks dra/occupancy.py). The helper tells the driver what claims hold from the prepare worker that
made the change, under the claim's lock (dra_helper/driver.py's Driver.held); up to nine Allocator
calls there would lengthen every Prepare and Unprepare. So the driver only records the new holdings
and wakes this thread: wakes coalesce (a burst of Prepares costs one recomputation with the newest
holdings), and the recomputation republishes only what changed. A failure is logged and the thread
goes on: the static values stay published, which costs placement quality only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 1.0


class HintThread:
    def __init__(self, recompute: Callable[[], None], name: str = "dra-hints") -> None:
        self._recompute = recompute
        self._name = name
        self._due = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        # Event.set itself, not a method around it: waking costs the prepare worker no Python call.
        self.wake: Callable[[], None] = self._due.set

    def start(self) -> None:
        if self._thread is None:
            self._stopping.clear()
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._due.set()
        if self._thread is not None:
            self._thread.join(timeout=STOP_TIMEOUT_S)
            self._thread = None

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while True:
            self._due.wait()
            if self._stopping.is_set():
                return
            self._due.clear()  # before the work: a wake during it runs it once more
            try:
                self._recompute()
            except Exception:  # the static values stay published; the next change tries again
                log.exception("recomputing the placement hints failed; the published ones stay")
