"""The one asyncio event loop that serves every kubelet socket in this process, on its own thread.

gRPC's asyncio stack shares one completion queue per process; several loops in several threads
all wake on every event and print spurious errors, so every server of this process runs on this
single loop. It starts on first use and lives as long as the process (a daemon thread). Other
threads hand it work with `run()`; nothing here knows about gRPC.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
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
            thread = threading.Thread(target=_run, args=(loop, ready), name="grpc-serving-loop", daemon=True)
            thread.start()
            ready.wait()
            _loop = loop
        return _loop


def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()


def run(coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
    """Run `coroutine` on the serving loop and wait for its result (never call this from the loop)."""
    future = asyncio.run_coroutine_threadsafe(coroutine, shared_loop())
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
