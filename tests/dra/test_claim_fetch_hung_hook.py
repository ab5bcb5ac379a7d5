"""ApiClaimFetcher's token hook when it hangs (issue 30 item 12): a call a read gave up on is not waited on
again, the next read calls the hook afresh, and the hung calls left running are bounded.

The API server is test_claim_fetch.py's recorder; each hook hangs on an Event the test sets before the
loop closes (asyncio.run waits for the executor's threads).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from device_plugin.dra_helper.api.transport import MAX_HUNG_REFRESHES, ApiTransport
from device_plugin.dra_helper.claims.api_read import ApiClaimFetcher
from tests.dra.test_claim_fetch import CLAIM, expired_client
from tests.dra.test_claim_fetch import recorder as recorder  # the fixture, shared


async def read_once_the_hook_returned(fetcher: ApiClaimFetcher) -> Mapping[str, Any] | None:
    """A read, tried again while it fails naming hung hook calls (their threads finish in their own time)."""
    deadline = time.monotonic() + 10.0
    while True:
        try:
            return await fetcher.fetch_claim("ns", "c")
        except RuntimeError as error:
            if "hook hangs" not in str(error) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.01)


def test_a_token_hook_that_hung_once_is_not_waited_on_again_the_next_read_asks_afresh(
    recorder: tuple[str, list[tuple[str, dict[str, str]]]],
) -> None:
    """Issue 30 item 12: every later read waited on the hung call until it returned, with no fresh one."""
    host, seen = recorder
    client = expired_client(host)
    hung, calls = threading.Event(), list[int]()

    def refresh(configuration: Any) -> None:
        calls.append(len(calls))
        if len(calls) == 1:
            hung.wait(10.0)  # the first call hangs (a dead exec plugin) until the test lets it go
        configuration.api_key = {"authorization": f"Bearer call-{len(calls)}"}

    client.configuration.refresh_api_key_hook = refresh
    fetcher = ApiClaimFetcher(ApiTransport(client), lambda: "v1", timeout_s=0.3)

    async def reads() -> tuple[str, Mapping[str, Any] | None]:
        try:
            with pytest.raises(RuntimeError, match=r"no token from the API client's refresh hook within 0.3 s"):
                await fetcher.fetch_claim("ns", "c")
            return "first failed", await fetcher.fetch_claim("ns", "c")
        finally:
            hung.set()
            await fetcher.transport.close()

    assert asyncio.run(reads()) == ("first failed", CLAIM)
    assert calls == [0, 1]
    assert [headers["authorization"] for _, headers in seen] == ["Bearer call-2"]


def test_hung_token_hook_calls_are_bounded_and_a_read_past_the_bound_fails_at_once(
    recorder: tuple[str, list[tuple[str, dict[str, str]]]],
) -> None:
    host, seen = recorder
    client = expired_client(host)
    hung, calls = threading.Event(), list[int]()

    def refresh(configuration: Any) -> None:
        calls.append(len(calls))
        hung.wait(10.0)
        configuration.api_key = {"authorization": "Bearer late"}

    client.configuration.refresh_api_key_hook = refresh
    fetcher = ApiClaimFetcher(ApiTransport(client), lambda: "v1", timeout_s=0.2)

    async def reads() -> list[str]:
        errors = []
        try:
            for _ in range(MAX_HUNG_REFRESHES + 1):
                try:
                    await fetcher.fetch_claim("ns", "c")
                except RuntimeError as error:
                    errors.append(str(error))
            hung.set()  # the hung calls return: a read goes through with the token they gave
            errors.append(str(await read_once_the_hook_returned(fetcher)))
        finally:
            hung.set()
            await fetcher.transport.close()
        return errors

    errors = asyncio.run(reads())
    assert errors == [
        *["no token from the API client's refresh hook within 0.2 s"] * MAX_HUNG_REFRESHES,
        f"the API client's refresh hook hangs: {MAX_HUNG_REFRESHES} calls have not returned; "
        "no new one is started until one does",
        str(CLAIM),
    ]
    assert len(calls) == MAX_HUNG_REFRESHES  # no thread past the bound
    assert [headers["authorization"] for _, headers in seen] == ["Bearer late"]
