"""The worker threads that the DRA servicers hand blocking work to, and how long that work has been
running.

Boundary: thread pools and bookkeeping; what runs in them is the Preparer's. Two pools, so that
neither
kind of work waits for the other:
- prepare workers run one claim each (its ResourceClaim read from the API server, then its
  checkpoint write), so the claims of one call are read concurrently, and all calls together hold at
  most PREPARE_WORKERS reads in flight (further claims queue);
- unprepare workers run whole Unprepare calls, which never touch the API server.
A task running longer than WEDGED_AFTER_S means the service is wedged (a read that ignores its
timeout, a checkpoint write stuck on a dead disk): `wedged()` says which, and the liveness probe
turns red on it, as the device-plugin mode's does when its servicer stops answering. Queued work is
not counted: a long queue is load, not a wedge. Finished work is handed back to the loop in batches
(Answers), not one loop wake-up per task as run_in_executor does; a call cancelled while its work is
queued never starts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# claim reads in flight at once, all calls together (each may wait REQUEST_TIMEOUT_S)
PREPARE_WORKERS = 16
UNPREPARE_WORKERS = 2  # Unprepare calls at once: checkpoint removals only, no API calls
WEDGED_AFTER_S = 60.0  # a task running longer is stuck: the kubelet's own deadline is shorter


def _nothing() -> None:
    pass


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
        self._answers = Answers()

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

    async def prepare(
        self, what: str, work: Callable[[], T], after: Callable[[], None] = _nothing
    ) -> T:
        """`work`'s result, run in a prepare worker. `after()` runs once `work` is over or will
        never run (refused, dropped), also when the caller was cancelled meanwhile: what `work`
        holds is let go then."""
        return await self._run(self._prepare, what, work, after)

    async def unprepare(self, what: str, work: Callable[[], T]) -> T:
        return await self._run(self._unprepare, what, work, _nothing)

    def wedged(self) -> str | None:
        """What has been running longer than the limit, or None."""
        now = time.monotonic()
        with self._lock:
            running = sorted(self._running.values())
        if running and now - running[0][0] > self._wedged_after_s:
            started, what = running[0]
            return (
                f"{what} has been running for {now - started:.0f} s (limit "
                f"{self._wedged_after_s:g} s): wedged"
            )
        return None

    async def _run(
        self,
        pool: ThreadPoolExecutor | None,
        what: str,
        work: Callable[[], T],
        after: Callable[[], None],
    ) -> T:
        if pool is None:
            after()
            raise Stopped("the DRA driver is stopping")
        number = next(self._numbers)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def tracked() -> None:
            with self._lock:
                self._running[number] = (time.monotonic(), what)
            try:
                outcome: tuple[bool, object] = (True, work())
            except BaseException as error:  # the caller's, raised on the loop
                outcome = (False, error)
            finally:
                with self._lock:
                    del self._running[number]
            self._answers.deliver(loop, future, outcome)

        try:
            queued = pool.submit(tracked)
        except RuntimeError as error:  # a pool that close() shut down since we looked
            after()
            raise Stopped("the DRA driver is stopping") from error
        queued.add_done_callback(lambda q: _finished(q, loop, future, after))
        try:
            return await future
        except asyncio.CancelledError:
            # not started yet: it never will be (a running one finishes; its answer is dropped)
            queued.cancel()
            raise


def _finished(
    queued: Future[None],
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    after: Callable[[], None],
) -> None:
    """The task ran, or was dropped (its caller left, or close()): `after()`, and a dropped task's
    caller's future is cancelled, since it never answers."""
    try:
        after()
    finally:
        _cancel_if_dropped(queued, loop, future)


def _cancel_if_dropped(
    queued: Future[None], loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]
) -> None:
    if queued.cancelled():
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(future.cancel)


class Answers:
    """Finished work handed back to its loop in batches: the first answer of a batch wakes the loop
    (one call_soon_threadsafe: a write to its self-pipe, a system call that lets go of the
    interpreter lock), the answers that come while that wake-up is pending ride along.
    run_in_executor wakes the loop once per task; under a burst of one-claim Prepares that was a
    write and a wake-up per claim."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[
            asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], tuple[bool, object]]]
        ] = {}

    def deliver(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        outcome: tuple[bool, object],
    ) -> None:
        with self._lock:
            batch = self._pending.setdefault(loop, [])
            batch.append((future, outcome))
            first = len(batch) == 1
        if first:
            try:
                loop.call_soon_threadsafe(self._drain, loop)
            except RuntimeError:  # the loop is closed: nobody waits for these answers any more
                with self._lock:
                    self._pending.pop(loop, None)

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            batch = self._pending.pop(loop, [])
        for future, (ok, value) in batch:
            if future.done():  # cancelled meanwhile (the kubelet left)
                continue
            if ok:
                future.set_result(value)
                continue
            try:
                future.set_exception(value)  # type: ignore[arg-type]
            # StopIteration, which a future refuses: still that caller's failure, not a hang
            except TypeError:
                future.set_exception(RuntimeError(f"{type(value).__name__} raised: {value}"))
