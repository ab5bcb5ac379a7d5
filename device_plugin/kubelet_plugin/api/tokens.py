"""The auth headers every request to the API server carries, renewed by the client's own refresh hook, off the loop.

Boundary: when to ask the client's configuration for its auth headers and how long to wait; the
configuration's hook decides what the token is. Auth is read through auth_settings(), so the client's
refresh hook renews an expiring token (the pod's projected service-account token, a kubeconfig exec
plugin), but never on the serving loop: the hook may run an exec plugin or an OIDC request for seconds,
and the loop serves every socket. It runs in a thread, once for all the requests that want it (single
flight), at most once every REFRESH_S; requests in between carry the token it gave. A hook that fails, or
runs past the request's timeout, is each waiting request's error; a hook that hung is not waited on
again: the request after the one that gave up on it starts a fresh attempt (a hook that hangs once, on a
dead exec plugin or a lost OIDC connection, then answers). Threads of the loop's default executor are
shared with every other blocking call, so at most MAX_HUNG hung attempts are left running at once; past
that a request fails at once until one of them returns.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from kubernetes import client as k8s

REFRESH_S = 1.0  # the token is asked of the client's configuration at most this often (a thread hop)
MAX_HUNG = 2  # hook calls that ran past a request's timeout, left running at once


class TokenError(RuntimeError):
    """No auth headers: the hook failed, hangs, or did not answer in time."""


def auth_headers(configuration: k8s.Configuration) -> dict[str, str]:
    """The client's auth headers (its token). Blocks while the client's refresh hook renews a stale token
    (a file read in a pod; an exec plugin or OIDC request with a kubeconfig): never call it on the loop."""
    settings = configuration.auth_settings().values()
    return {s["key"]: s["value"] for s in settings if s.get("in") == "header" and s.get("value")}


class AuthHeaders:
    def __init__(self, configuration: k8s.Configuration, *, refresh_s: float = REFRESH_S) -> None:
        self._configuration = configuration
        self._refresh_s = refresh_s
        self._headers: dict[str, str] = {}  # the auth headers last read, at _read_at (monotonic)
        self._read_at = -math.inf
        self._reading: asyncio.Future[dict[str, str]] | None = None  # the read in flight, if any
        self._hung: set[asyncio.Future[dict[str, str]]] = set()  # given up on by a request, still running

    async def current(self, timeout_s: float) -> dict[str, str]:
        """The auth headers, read again in a thread once they are REFRESH_S old; one read at a time,
        awaited by every caller that comes meanwhile (shielded: a caller that leaves does not cancel it),
        each for `timeout_s` at most (a hook that hangs fails the requests, it does not hold them). The
        first request that gives up on a read sets it aside as hung, so the next one starts afresh."""
        if time.monotonic() - self._read_at < self._refresh_s:
            return self._headers
        loop = asyncio.get_running_loop()
        reading = self._reading
        if reading is None or reading.get_loop() is not loop:
            self._hung = {hung for hung in self._hung if hung.get_loop() is loop}  # of this loop only
            if len(self._hung) >= MAX_HUNG:
                raise TokenError(
                    f"the API client's refresh hook hangs: {len(self._hung)} calls have not returned; "
                    "no new one is started until one does"
                )
            reading = self._reading = asyncio.ensure_future(self._read())
            reading.add_done_callback(_retrieved)  # its failure is its waiters', never "unretrieved"
        try:
            return await asyncio.wait_for(asyncio.shield(reading), timeout_s)
        except TimeoutError:
            if self._reading is reading:  # the first request to give up on it: the next one starts afresh
                self._reading = None
                self._hung.add(reading)
            raise TokenError(f"no token from the API client's refresh hook within {timeout_s:g} s") from None

    async def _read(self) -> dict[str, str]:
        try:
            headers = await asyncio.to_thread(auth_headers, self._configuration)  # may refresh the token
        except Exception as error:  # the hook's failure (an exec plugin that fails): each request's error
            raise TokenError(f"cannot get a token for the API server: {type(error).__name__}: {error}") from error
        finally:  # this task is done: no request waits on it any more (a later one may have replaced it)
            this = asyncio.current_task()
            if self._reading is this:
                self._reading = None
            self._hung.discard(this)  # type: ignore[arg-type]
        self._headers, self._read_at = headers, time.monotonic()
        return headers


def _retrieved(done: asyncio.Future[Any]) -> None:
    if not done.cancelled():
        done.exception()
