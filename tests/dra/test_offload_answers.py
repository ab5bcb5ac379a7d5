"""Offload hands finished work back to the loop in batches (offload.Answers): every caller still gets its own
result or exception, a call cancelled while its work is queued never starts it, and work dropped by a
closing pool fails its caller as cancelled (the one-claim Prepare answers that claim with an error)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from device_plugin.dra_helper.service.offload import PREPARE_WORKERS, Offload
from device_plugin.dra_helper.service.servicers import _settled

WAIT_S = 30.0  # a hang guard, not a performance bound


def test_every_caller_of_a_burst_gets_its_own_result_or_exception() -> None:
    def work(n: int) -> int:
        if n == 1:
            raise StopIteration  # which an asyncio future refuses to hold: the caller still gets an error
        if n % 7 == 0:
            raise ValueError(f"claim {n}")
        return n * n

    async def scenario() -> list[object]:
        offload = Offload()
        offload.open()
        try:
            calls = [offload.prepare(f"work {n}", lambda n=n: work(n)) for n in range(500)]
            return await asyncio.gather(*calls, return_exceptions=True)
        finally:
            offload.close()

    outcomes = asyncio.run(scenario())
    assert isinstance(outcomes[1], RuntimeError) and "StopIteration" in str(outcomes[1])
    for n, outcome in enumerate(outcomes):
        if n == 1:
            continue
        if n % 7 == 0:
            assert isinstance(outcome, ValueError) and str(outcome) == f"claim {n}"
        else:
            assert outcome == n * n


def _hold_every_worker(
    offload: Offload, release: threading.Event
) -> tuple[list[asyncio.Future[None]], threading.Semaphore]:
    """Every prepare worker busy until `release`; the semaphore counts the ones that started."""
    started = threading.Semaphore(0)

    def held() -> None:
        started.release()
        release.wait(WAIT_S)

    tasks = [asyncio.ensure_future(offload.prepare("held", held)) for _ in range(PREPARE_WORKERS)]
    return tasks, started


async def _until_all_started(started: threading.Semaphore) -> None:
    loop = asyncio.get_running_loop()
    for _ in range(PREPARE_WORKERS):
        assert await loop.run_in_executor(None, started.acquire, True, WAIT_S)


def test_a_call_cancelled_while_its_work_is_queued_never_starts_it() -> None:
    ran = threading.Event()

    async def scenario() -> None:
        offload, release = Offload(), threading.Event()
        offload.open()
        try:
            held, started = _hold_every_worker(offload, release)
            await _until_all_started(started)
            queued = asyncio.ensure_future(offload.prepare("queued", ran.set))
            await asyncio.sleep(0)  # the call now waits on its queued work
            queued.cancel()
            with pytest.raises(asyncio.CancelledError):
                await queued
            release.set()
            await asyncio.gather(*held)
            done = asyncio.ensure_future(offload.prepare("after", lambda: None))
            await done  # the pool has run everything queued before this: the cancelled work would have run
        finally:
            release.set()
            offload.close()

    asyncio.run(scenario())
    assert not ran.is_set()


def test_work_dropped_by_a_closing_pool_fails_its_caller_as_cancelled() -> None:
    ran = threading.Event()

    async def scenario() -> object:
        offload, release = Offload(), threading.Event()
        offload.open()
        try:
            _, started = _hold_every_worker(offload, release)
            await _until_all_started(started)
            queued = asyncio.ensure_future(_settled(offload.prepare("queued", ran.set)))
            await asyncio.sleep(0)
            offload.close()  # the driver stops: queued work is dropped
            return await asyncio.wait_for(queued, WAIT_S)
        finally:
            release.set()

    outcome = asyncio.run(scenario())
    assert isinstance(outcome, asyncio.CancelledError)  # the claim's error; the call itself was not cancelled
    assert not ran.is_set()
