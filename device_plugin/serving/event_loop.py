"""The one asyncio event loop that serves every kubelet socket in this process, on its own thread.

gRPC's asyncio stack shares one completion queue per process; several loops in several threads
all wake on every event and print spurious errors, so every server of this process runs on this
single loop. It starts on first use and lives as long as the process (a daemon thread). Other
threads hand it work with `run()`; nothing here knows about gRPC.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import logging
import threading
import traceback
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def shared_loop() -> asyncio.AbstractEventLoop:
    """The serving loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            thread = threading.Thread(
                target=_run, args=(loop, ready), name="grpc-serving-loop", daemon=True
            )
            thread.start()
            ready.wait()
            _loop = loop
        return _loop


def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.set_exception_handler(_report_loop_exception)
    loop.call_soon(ready.set)
    loop.run_forever()


# Where gRPC's asyncio completion-queue poller lives: when the last gRPC object of the process goes,
# gRPC closes the poller's socket while the loop may still call its reader once more (EBADF).
# Harmless, but the default handler prints it as an ERROR with a traceback, which reads like a crash
# at shutdown.
_GRPC_POLLER_SOURCE = "completion_queue.pyx.pxi"


def is_grpc_poller_teardown(exception: BaseException | None) -> bool:
    """Whether `exception` is gRPC's poller reading its already-closed socket (see
    _GRPC_POLLER_SOURCE)."""
    if not isinstance(exception, OSError) or exception.errno != errno.EBADF:
        return False
    return any(
        frame.filename.endswith(_GRPC_POLLER_SOURCE)
        for frame in traceback.extract_tb(exception.__traceback__)
    )


def _report_loop_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if is_grpc_poller_teardown(context.get("exception")):
        log.debug(
            "gRPC's completion-queue poller read its closed socket after gRPC shut it down "
            "(harmless)"
        )
        return
    loop.default_exception_handler(context)


def submit(coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start `coroutine` on the serving loop; cancelling the future cancels it there."""
    return asyncio.run_coroutine_threadsafe(coroutine, shared_loop())


def run(coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
    """Run `coroutine` on the serving loop and wait for its result (never call this from the
    loop)."""
    future = submit(coroutine)
    try:
        return future.result(timeout_s)
    except TimeoutError:
        future.cancel()
        raise


def schedule(coroutine: Coroutine[Any, Any, Any]) -> None:
    """Run `coroutine` on the serving loop without waiting for it; a failure is logged."""
    asyncio.run_coroutine_threadsafe(coroutine, shared_loop()).add_done_callback(_log_failure)


def _log_failure(future: concurrent.futures.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("a scheduled serving task failed", exc_info=future.exception())


def call_soon(callback: Any, *args: Any) -> None:
    """Schedule a plain callback on the serving loop from any thread."""
    shared_loop().call_soon_threadsafe(callback, *args)
