"""The worker threads that the DRA servicers hand blocking work to, and how long that work has been running.

Boundary: thread pools and bookkeeping; what runs in them is the Preparer's. Two pools, so that neither
kind of work waits for the other:
- prepare workers run one claim each (its ResourceClaim read from the API server, then its checkpoint
  write), so the claims of one call are read concurrently, and all calls together hold at most
  PREPARE_WORKERS reads in flight (further claims queue);
- unprepare workers run whole Unprepare calls, which never touch the API server.
A task running longer than WEDGED_AFTER_S means the service is wedged (a read that ignores its timeout,
a checkpoint write stuck on a dead disk): `wedged()` says which, and the liveness probe turns red on it,
as the device-plugin mode's does when its servicer stops answering. Queued work is not counted: a long
queue is load, not a wedge.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

PREPARE_WORKERS = 16  # claim reads in flight at once, all calls together (each may wait REQUEST_TIMEOUT_S)
UNPREPARE_WORKERS = 2  # Unprepare calls at once: checkpoint removals only, no API calls
WEDGED_AFTER_S = 60.0  # a task running longer is stuck: the kubelet's own deadline is shorter


class Stopped(RuntimeError):
    """The pools are closed: the driver is stopping (or not started)."""


class Offload:
    """Opened at start, closed at stop (running tasks finish; queued ones are dropped)."""

    def __init__(self, *, wedged_after_s: float = WEDGED_AFTER_S) -> None:
        self._wedged_after_s = wedged_after_s
        self._prepare: ThreadPoolExecutor | None = None
        self._unprepare: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._running: dict[int, tuple[float, str]] = {}  # task number -> (started, what)
        self._numbers = itertools.count()

    def open(self) -> None:
        self.close()
        self._prepare = ThreadPoolExecutor(PREPARE_WORKERS, thread_name_prefix="dra-prepare")
        self._unprepare = ThreadPoolExecutor(UNPREPARE_WORKERS, thread_name_prefix="dra-unprepare")

    def close(self) -> None:
        for pool in (self._prepare, self._unprepare):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._prepare = self._unprepare = None

    def running(self) -> bool:
        return self._prepare is not None

    async def prepare(self, what: str, work: Callable[[], T]) -> T:
        return await self._run(self._prepare, what, work)

    async def unprepare(self, what: str, work: Callable[[], T]) -> T:
        return await self._run(self._unprepare, what, work)

    def wedged(self) -> str | None:
        """What has been running longer than the limit, or None."""
        now = time.monotonic()
        with self._lock:
            running = sorted(self._running.values())
        if running and now - running[0][0] > self._wedged_after_s:
            started, what = running[0]
            return f"{what} has been running for {now - started:.0f} s (limit {self._wedged_after_s:g} s): wedged"
        return None

    async def _run(self, pool: ThreadPoolExecutor | None, what: str, work: Callable[[], T]) -> T:
        if pool is None:
            raise Stopped("the DRA driver is stopping")
        number = next(self._numbers)

        def tracked() -> T:
            with self._lock:
                self._running[number] = (time.monotonic(), what)
            try:
                return work()
            finally:
                with self._lock:
                    del self._running[number]

        try:
            future = asyncio.get_running_loop().run_in_executor(pool, tracked)
        except RuntimeError as error:  # a pool that close() shut down since we looked
            raise Stopped("the DRA driver is stopping") from error
        return await future
