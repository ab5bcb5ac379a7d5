"""The one way the helper talks to the API server: HTTP on the serving loop (aiohttp), with the
client's settings.

Boundary: requests and answers (status, reason, body bytes), the connection and its auth; what a
path means is the caller's (slice_store, slice_watch, kube, the claim read in claims/prepare.py).
The `kubernetes` client is only where the settings come from (kubeconfig or the pod's service
account, read by kube.api_client): every request goes through here, claim reads on the loop
(`send`), the publisher's threads through `call` (the same request, run on the loop while the thread
waits), the slice watch through `stream`. One transport because claim reads decide it: 1,000
one-claim Prepares on a 2-core node make the driver's interpreter the bottleneck, and a read through
the client's urllib3, in worker threads, costs about 0.8 ms of it (its GIL hand-offs included),
where aiohttp on the loop costs about 0.3 ms (docs/benchmarks.md).

The connection is the client's, read once when the transport is made: its configuration's host, CA
(file or data), client certificate and key, verify_ssl, tls_server_name (else a string
assert_hostname), and an HTTP(S) proxy (its headers go on the CONNECT to an https host), unless
no_proxy names the host; the client's default headers (its User-Agent) and cookie. A SOCKS proxy is
not supported: every request fails naming it. An answer is read up to the caller's bound
(decompressed), no further. At most CONNECTIONS connections are open; the session is made on first
use on the running loop (with the per-request options it implies) and closed with close() (a request
after that opens a new one).

The token (AuthHeaders) is read through the configuration's auth_settings(), so the client's refresh
hook renews an expiring one (the pod's projected service-account token, a kubeconfig exec plugin),
but never on the loop: the hook may run an exec plugin or an OIDC request for seconds, and the loop
serves every socket. It runs in a thread, once for all the requests that want it (single flight), at
most once every AUTH_REFRESH_S; requests in between carry the token it gave. A hook that fails, or
runs past the request's timeout, is each waiting request's error; a hook that hung is not waited on
again: the request after the one that gave up on it starts a fresh attempt (a hook that hangs once,
on a dead exec plugin or a lost OIDC connection, then answers). Threads of the loop's default
executor are shared with every other blocking call, so at most MAX_HUNG_REFRESHES hung attempts are
left running at once; past that a request fails at once until one of them returns.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes import client as k8s

from device_plugin.dra_helper.api.api_errors import AnswerTooBig, ApiError, ApiUnreachable
from device_plugin.dra_helper.api.connection_settings import TlsSettings, proxy_for, tls_settings
from device_plugin.serving import event_loop

REQUEST_TIMEOUT_S = 5.0
# claim reads take at most 16 (claims/prepare.py); the watch, the publisher and its deletes the rest
CONNECTIONS = 24
# a LIST of one node's slices is far below this; callers bound tighter
MAX_ANSWER_BYTES = 64 * 1024 * 1024
CLOSE_TIMEOUT_S = 1.0  # closing the connections at stop
CALL_SLACK_S = 1.0  # a thread waits this much past the request's own timeout for the loop to answer
# the token is asked of the client's configuration at most this often (a thread hop)
AUTH_REFRESH_S = 1.0
MAX_HUNG_REFRESHES = 2  # hook calls that ran past a request's timeout, left running at once


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    body: bytes

    def check(self, what: str = "") -> None:
        """ApiError for a status other than 2xx (`what`: the request, named in it)."""
        if not 200 <= self.status <= 299:
            raise ApiError(self.status, self.reason, self.body, what)

    def json(self, what: str = "") -> Any:
        """The decoded body of a 2xx answer (ValueError: it is no JSON); ApiError for any other
        status."""
        self.check(what)
        return json.loads(self.body)


class ApiTransport:
    def __init__(self, client: k8s.ApiClient, *, auth_refresh_s: float = AUTH_REFRESH_S) -> None:
        configuration = client.configuration
        self._configuration = configuration
        self._host = configuration.host.rstrip("/")
        self._headers = {**client.default_headers, "Accept": "application/json"}
        if client.cookie:
            self._headers["Cookie"] = client.cookie
        self._proxy = proxy_for(configuration)
        self._auth = AuthHeaders(configuration, refresh_s=auth_refresh_s)
        # made with the session (a CA file may appear after start)
        self._tls: TlsSettings | None = None
        self._session: aiohttp.ClientSession | None = None
        # per-request options (server name, proxy), made with the session
        self._options: dict[str, Any] = {}
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    async def send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
        limit_bytes: int = MAX_ANSWER_BYTES,
    ) -> Answer:
        """One request on the running loop, its answer read whole (up to `limit_bytes`, else
        AnswerTooBig); ApiUnreachable when no answer came within `timeout_s` (the token's wait
        included)."""
        headers = await self._request_headers(timeout_s, body)
        try:
            async with self._opened().request(
                method,
                self._host + path,
                params=query,
                data=None if body is None else json.dumps(body),
                headers=headers,
                timeout=self._timeout(timeout_s),
                **self._options,
            ) as response:
                data = await _bounded_body(response, limit_bytes)
                return Answer(response.status, response.reason or "", data)
        except TimeoutError:
            raise ApiUnreachable(f"no answer from the API server within {timeout_s:g} s") from None
        except aiohttp.ClientError as error:
            raise ApiUnreachable(f"{type(error).__name__}: {error}") from error

    def call(self, method: str, path: str, **options: Any) -> Answer:
        """send(), from a thread (never from the serving loop): run there while this thread
        waits."""
        timeout_s = float(options.get("timeout_s", REQUEST_TIMEOUT_S))
        try:
            return event_loop.run(
                self.send(method, path, **options), timeout_s=2 * timeout_s + CALL_SLACK_S
            )
        except TimeoutError:  # the loop itself did not get to it (blocked): no answer either
            raise ApiUnreachable(
                f"no answer from the API server within {timeout_s:g} s (serving loop busy)"
            ) from None

    @asynccontextmanager
    async def stream(
        self,
        path: str,
        query: Mapping[str, str],
        *,
        read_timeout_s: float,
        connect_timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> AsyncIterator[aiohttp.StreamReader]:
        """A long GET (a watch): the body as it arrives, silent for at most `read_timeout_s`.
        ApiError for an answer other than 2xx (its first 64 KiB read), ApiUnreachable when nobody
        answers."""
        headers = await self._request_headers(connect_timeout_s, None)
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout_s, sock_read=read_timeout_s
        )
        try:
            async with self._opened().get(
                self._host + path, params=query, headers=headers, timeout=timeout, **self._options
            ) as response:
                if not 200 <= response.status <= 299:
                    raise ApiError(
                        response.status, response.reason or "", await response.content.read(65536)
                    )
                yield response.content
        except TimeoutError:
            raise ApiUnreachable(
                f"the API server's stream was silent for {read_timeout_s:g} s"
            ) from None
        except aiohttp.ClientError as error:
            raise ApiUnreachable(f"{type(error).__name__}: {error}") from error

    async def close(self) -> None:
        session, self._session, self._loop = self._session, None, None
        if session is not None and not session.closed:
            await session.close()

    def shut(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """close(), from a thread: the connections closed on the loop they were made on."""
        event_loop.run(self.close(), timeout_s=timeout_s)

    async def _request_headers(self, timeout_s: float, body: object) -> dict[str, str]:
        if self._proxy.startswith("socks"):
            raise ApiUnreachable(
                f"the API client's proxy {self._proxy} is SOCKS, which this driver does not support"
            )
        headers = {**self._headers, **await self._auth.current(timeout_s)}
        if body is not None:  # a real API server refuses a body of unknown format (415)
            headers["Content-Type"] = "application/json"
        return headers

    def _timeout(self, total_s: float) -> aiohttp.ClientTimeout:
        if (timeout := self._timeouts.get(total_s)) is None:  # the few a process uses, made once
            timeout = self._timeouts[total_s] = aiohttp.ClientTimeout(total=total_s)
        return timeout

    def _opened(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            if self._host.startswith("https:"):
                try:
                    self._tls = tls_settings(self._configuration)
                # ssl.SSLError is an OSError: a bad CA, cert or key
                except (OSError, ValueError) as error:
                    raise ApiUnreachable(f"cannot set up TLS to the API server: {error}") from error
            connector = aiohttp.TCPConnector(
                limit=CONNECTIONS, ssl=self._tls.context if self._tls else False
            )
            self._session, self._loop = aiohttp.ClientSession(connector=connector), loop
            self._options = self._request_options()
        return self._session

    def _request_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self._tls is not None and self._tls.server_hostname:
            options["server_hostname"] = self._tls.server_hostname
        if self._proxy:
            options["proxy"] = self._proxy
            if self._configuration.proxy_headers:
                options["proxy_headers"] = dict(self._configuration.proxy_headers)
        return options


async def _bounded_body(response: aiohttp.ClientResponse, limit_bytes: int) -> bytes:
    """The whole body, decompressed, refused past `limit_bytes` before it is all in memory."""
    too_big = f"the API server's answer passes {limit_bytes / (1024 * 1024):g} MiB"
    if (response.content_length or 0) > limit_bytes:
        raise AnswerTooBig(too_big)
    chunks, size = [], 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit_bytes:
            raise AnswerTooBig(too_big)
        chunks.append(chunk)
    return b"".join(chunks)


def auth_headers(configuration: k8s.Configuration) -> dict[str, str]:
    """The client's auth headers (its token). Blocks while the client's refresh hook renews a stale
    token (a file read in a pod; an exec plugin or OIDC request with a kubeconfig): never call it on
    the loop."""
    settings = configuration.auth_settings().values()
    return {s["key"]: s["value"] for s in settings if s.get("in") == "header" and s.get("value")}


class AuthHeaders:
    """The auth headers of the client's configuration, renewed by its refresh hook off the loop
    (module docstring)."""

    def __init__(
        self, configuration: k8s.Configuration, *, refresh_s: float = AUTH_REFRESH_S
    ) -> None:
        self._configuration = configuration
        self._refresh_s = refresh_s
        self._headers: dict[str, str] = {}  # the auth headers last read, at _read_at (monotonic)
        self._read_at = -math.inf
        self._reading: asyncio.Future[dict[str, str]] | None = None  # the read in flight, if any
        # given up on by a request, still running
        self._hung: set[asyncio.Future[dict[str, str]]] = set()

    async def current(self, timeout_s: float) -> dict[str, str]:
        """The auth headers, read again in a thread once they are AUTH_REFRESH_S old; one read at a
        time, awaited by every caller that comes meanwhile (shielded: a caller that leaves does not
        cancel it), each for `timeout_s` at most (a hook that hangs fails the requests, it does not
        hold them). The first request that gives up on a read sets it aside as hung, so the next one
        starts afresh."""
        if time.monotonic() - self._read_at < self._refresh_s:
            return self._headers
        loop = asyncio.get_running_loop()
        reading = self._reading
        if reading is None or reading.get_loop() is not loop:
            # of this loop only
            self._hung = {hung for hung in self._hung if hung.get_loop() is loop}
            if len(self._hung) >= MAX_HUNG_REFRESHES:
                raise ApiUnreachable(
                    f"the API client's refresh hook hangs: {len(self._hung)} calls have not "
                    "returned; "
                    "no new one is started until one does"
                )
            reading = self._reading = asyncio.ensure_future(self._read())
            # its failure is its waiters', never "unretrieved"
            reading.add_done_callback(_retrieved)
        try:
            return await asyncio.wait_for(asyncio.shield(reading), timeout_s)
        except TimeoutError:
            # the first request to give up on it: the next one starts afresh
            if self._reading is reading:
                self._reading = None
                self._hung.add(reading)
            raise ApiUnreachable(
                f"no token from the API client's refresh hook within {timeout_s:g} s"
            ) from None

    async def _read(self) -> dict[str, str]:
        try:
            # may refresh the token
            headers = await asyncio.to_thread(auth_headers, self._configuration)
        # the hook's failure (an exec plugin that fails): each request's error
        except Exception as error:
            raise ApiUnreachable(
                f"cannot get a token for the API server: {type(error).__name__}: {error}"
            ) from error
        # this task is done: no request waits on it any more (a later one may have replaced it)
        finally:
            this = asyncio.current_task()
            if self._reading is this:
                self._reading = None
            self._hung.discard(this)  # type: ignore[arg-type]
        self._headers, self._read_at = headers, time.monotonic()
        return headers


def _retrieved(done: asyncio.Future[Any]) -> None:
    if not done.cancelled():
        done.exception()
