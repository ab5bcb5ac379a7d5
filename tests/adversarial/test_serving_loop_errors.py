"""The serving loop's exception handler: gRPC's poller teardown (EBADF from its completion queue) is
quiet; every other loop exception still reaches asyncio's default handler (logged at ERROR)."""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Callable

import pytest

from device_plugin.serving import event_loop


def _raised_in(filename: str, error: OSError) -> OSError:
    """`error` raised from a function whose code claims to live in `filename` (as gRPC's Cython frames do)."""
    namespace: dict[str, Callable[[OSError], None]] = {}
    exec(compile("def _handle_events(error):\n    raise error\n", filename, "exec"), namespace)
    try:
        namespace["_handle_events"](error)
    except OSError as raised:
        return raised
    raise AssertionError("not raised")


GRPC_POLLER = "src/python/grpc/_cython/_cygrpc/aio/completion_queue.pyx.pxi"


@pytest.mark.parametrize(
    ("exception", "quiet"),
    [
        (_raised_in(GRPC_POLLER, OSError(errno.EBADF, "Bad file descriptor")), True),
        (_raised_in(GRPC_POLLER, OSError(errno.EIO, "I/O error")), False),
        (_raised_in("device_plugin/serving/kept_socket.py", OSError(errno.EBADF, "Bad file descriptor")), False),
        (RuntimeError("a handler bug"), False),
    ],
    ids=[
        "grpc-poller-ebadf-is-quiet",
        "grpc-poller-other-errno-is-reported",
        "ebadf-elsewhere-is-reported",
        "any-other-exception-is-reported",
    ],
)
def test_only_grpcs_poller_teardown_is_kept_out_of_the_error_log(
    exception: BaseException, quiet: bool, caplog: pytest.LogCaptureFixture
) -> None:
    loop = event_loop.shared_loop()
    with caplog.at_level(logging.DEBUG):
        event_loop.run(_report(exception))
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name == "asyncio"]
    assert (len(errors) == 0) == quiet, [r.getMessage() for r in errors]
    assert not loop.is_closed()


async def _report(exception: BaseException) -> None:
    loop = asyncio.get_running_loop()
    loop.call_exception_handler({"message": "Exception in callback None()", "exception": exception})
