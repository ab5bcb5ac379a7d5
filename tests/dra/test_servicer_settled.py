"""servicers._settled, the one-claim Prepare's stand-in for gather(return_exceptions=True): a claim whose work
was cancelled (its pool closed) or failed gets that as its outcome; only the call's own cancellation (the
kubelet left) propagates, so that the claims still running are told to write nothing."""

from __future__ import annotations

import asyncio

import pytest

from device_plugin.dra_helper.claims.prepare import PrepareResult
from device_plugin.dra_helper.service.servicers import _settled


def test_the_result_a_failure_and_a_cancelled_work_are_outcomes() -> None:
    async def scenario() -> list[object]:
        loop = asyncio.get_running_loop()
        done, failed, dropped = loop.create_future(), loop.create_future(), loop.create_future()
        done.set_result(PrepareResult())
        failed.set_exception(RuntimeError("boom"))
        dropped.cancel()  # what a closed pool does to a queued task
        return [await _settled(done), await _settled(failed), await _settled(dropped)]

    result, failure, cancelled = asyncio.run(scenario())
    assert result == PrepareResult()
    assert isinstance(failure, RuntimeError) and str(failure) == "boom"
    assert isinstance(cancelled, asyncio.CancelledError)


def test_the_calls_own_cancellation_propagates() -> None:
    async def scenario() -> None:
        never: asyncio.Future[PrepareResult] = asyncio.get_running_loop().create_future()
        call = asyncio.create_task(_settled(never))
        await asyncio.sleep(0)  # the call now waits on its work
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert never.cancelled()  # and the work is told, as gather tells its children

    asyncio.run(scenario())
