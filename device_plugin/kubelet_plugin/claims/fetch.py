"""ResourceClaim reads for NodePrepareResources: one GET a claim, awaited on the serving loop (aiohttp).

Boundary: the HTTP read and what the API server's answer means as a dict (None: no such claim), in the
resource.k8s.io version the publisher discovered (`discovered`; asked of the server when it has none
yet); what the body says is the Preparer's. Everything else of ours talks to the API server through the
`kubernetes` client (kubelet_plugin/api/kube.py); claim reads do not, because there are many at once: 1,000 one-claim
Prepares on a 2-core node make the driver's interpreter the bottleneck, and a read through the client's
urllib3, in worker threads, costs about 0.8 ms of it (its GIL hand-offs included), where aiohttp on the
loop costs about 0.3 ms (docs/benchmarks.md, bench_checkpoint.py (c)).

The connection is the client's, read once when the fetcher is made: its configuration's host, CA (file
or data), client certificate and key, verify_ssl, tls_server_name (else a string assert_hostname), and an
HTTP(S) proxy (its headers go on the CONNECT to an https host), unless no_proxy names the host; the
client's default headers (its User-Agent) and cookie. Auth is read from the configuration
(auth_settings()), so the client's own refresh hook renews an expiring token (the pod's projected
service-account token, a kubeconfig exec plugin), but never on the loop: the hook may run an exec
plugin or an OIDC request for seconds, and the loop serves every socket. It runs in a thread, once for
all the reads that want it (single flight), at most once every AUTH_REFRESH_S; reads in between carry
the token it gave. A hook that fails, or runs past the read timeout, is each waiting read's error; a
hook that hung is not waited on again: the read after the one that gave up on it starts a fresh attempt
(a hook that hangs once, on a dead exec plugin or a lost OIDC connection, then answers). Threads of the
loop's default executor are shared with every other blocking call, so at most MAX_HUNG_REFRESHES hung
attempts are left running at once; past that a read fails at once until one of them returns. A
SOCKS proxy is not supported here: every read fails naming it. An answer is read up to MAX_ANSWER_BYTES
(decompressed), no further. At most READS_IN_FLIGHT reads are sent at once (further ones wait their
turn before their own REQUEST_TIMEOUT_S starts); the session is made on first use on the running loop,
and closed with close().
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from kubernetes import client as k8s

from device_plugin.kubelet_plugin.api.kube import (
    REQUEST_TIMEOUT_S,
    auth_headers,
    fixed_headers,
    newest_resource_version,
)
from device_plugin.kubelet_plugin.api.slices import GROUP
from device_plugin.kubelet_plugin.claims.claim import check_claim_name

READS_IN_FLIGHT = 16  # claim reads sent at once, all calls together
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # a claim is at most ~1.5 MiB (etcd's object limit); past this, no claim
AUTH_REFRESH_S = 1.0  # the token is asked of the client's configuration at most this often (a thread hop)
MAX_HUNG_REFRESHES = 2  # token hook attempts that ran past the read timeout, left running at once
_CLAIM_PATH = "/apis/{group}/{version}/namespaces/{namespace}/resourceclaims/{name}"  # names checked first


class ApiClaimFetcher:
    """The Preparer's ClaimFetcher in production."""

    def __init__(
        self,
        client: k8s.ApiClient,
        discovered: Callable[[], str | None] = lambda: None,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
        auth_refresh_s: float = AUTH_REFRESH_S,
    ) -> None:
        """`discovered()`: the resource.k8s.io version the publisher found the server serving, or None."""
        self._client = client
        self._discovered = discovered
        self._version: str | None = None
        configuration = client.configuration
        self._configuration = configuration
        self._fixed_headers = fixed_headers(client)
        self._host = configuration.host.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._timeout_s = timeout_s
        self._tls: TlsSettings | None = None  # made with the session (a CA file may appear after start)
        self._proxy = proxy_for(configuration)
        self._session: aiohttp.ClientSession | None = None
        self._turns: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._auth_refresh_s = auth_refresh_s
        self._auth: dict[str, str] = {}  # the auth headers last read, at _auth_at (monotonic)
        self._auth_at = -math.inf
        self._auth_reading: asyncio.Future[dict[str, str]] | None = None  # the read in flight, if any
        self._auth_hung: set[asyncio.Future[dict[str, str]]] = set()  # given up on by a read, still running

    async def fetch_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The claim, or None when it does not exist. ValueError: a name no claim can have (not sent);
        RuntimeError: no answer, or an answer other than the claim or 404 (the status named)."""
        check_claim_name(namespace, name)
        if self._version is None:  # the publisher discovers it at start; until then, ask (blocking: a thread)
            found = self._discovered()
            self._version = found or await asyncio.to_thread(newest_resource_version, self._client)
        api_version = self._version
        if self._proxy.startswith("socks"):
            raise RuntimeError(f"the API client's proxy {self._proxy} is SOCKS, which claim reads do not support")
        session, turns = self._opened()
        path = _CLAIM_PATH.format(group=GROUP, version=api_version, namespace=namespace, name=name)
        headers = {**self._fixed_headers, **await self._auth_headers()}
        async with turns:
            try:
                async with session.get(self._host + path, headers=headers, **self._options()) as response:
                    data = await _bounded_body(response)
                    status, reason = response.status, response.reason
            except TimeoutError:
                raise RuntimeError(f"no answer from the API server within {self._timeout_s:g} s") from None
            except aiohttp.ClientError as error:
                raise RuntimeError(f"{type(error).__name__}: {error}") from error
        if status == 404:
            return None
        if not 200 <= status <= 299:
            raise RuntimeError(f"HTTP {status} {reason}")
        obj = json.loads(data)
        return obj if isinstance(obj, dict) else None  # JSON, but no object: no claim in it

    async def close(self) -> None:
        session, self._session, self._turns, self._loop = self._session, None, None, None
        if session is not None and not session.closed:
            await session.close()

    def _opened(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._session is None or self._turns is None or self._loop is not loop or self._session.closed:
            if self._host.startswith("https:"):
                try:
                    self._tls = tls_settings(self._configuration)
                except (OSError, ValueError) as error:  # ssl.SSLError is an OSError: a bad CA, cert or key
                    raise RuntimeError(f"cannot set up TLS to the API server: {error}") from error
            connector = aiohttp.TCPConnector(limit=READS_IN_FLIGHT, ssl=self._tls.context if self._tls else False)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
            self._turns, self._loop = asyncio.Semaphore(READS_IN_FLIGHT), loop
        return self._session, self._turns

    async def _auth_headers(self) -> dict[str, str]:
        """The auth headers, read again in a thread once they are AUTH_REFRESH_S old; one read at a time,
        awaited by every caller that comes meanwhile (shielded: a caller that leaves does not cancel it),
        each for the read timeout at most (a hook that hangs fails the reads, it does not hold them). The
        first read that gives up on a read sets it aside as hung, so the next one starts afresh."""
        if time.monotonic() - self._auth_at < self._auth_refresh_s:
            return self._auth
        loop = asyncio.get_running_loop()
        reading = self._auth_reading
        if reading is None or reading.get_loop() is not loop:
            self._auth_hung = {hung for hung in self._auth_hung if hung.get_loop() is loop}  # of this loop only
            if len(self._auth_hung) >= MAX_HUNG_REFRESHES:
                raise RuntimeError(
                    f"the API client's refresh hook hangs: {len(self._auth_hung)} calls have not returned; "
                    "no new one is started until one does"
                )
            reading = self._auth_reading = asyncio.ensure_future(self._read_auth())
            reading.add_done_callback(_retrieved)  # its failure is its waiters', never "unretrieved"
        try:
            return await asyncio.wait_for(asyncio.shield(reading), self._timeout_s)
        except TimeoutError:
            if self._auth_reading is reading:  # the first read to give up on it: the next read starts afresh
                self._auth_reading = None
                self._auth_hung.add(reading)
            raise RuntimeError(f"no token from the API client's refresh hook within {self._timeout_s:g} s") from None

    async def _read_auth(self) -> dict[str, str]:
        try:
            headers = await asyncio.to_thread(auth_headers, self._configuration)  # may refresh the token
        except Exception as error:  # the hook's failure (an exec plugin that fails): each read's error
            raise RuntimeError(f"cannot get a token for the API server: {type(error).__name__}: {error}") from error
        finally:  # this task is done: no read waits on it any more (a later one may have replaced it)
            this = asyncio.current_task()
            if self._auth_reading is this:
                self._auth_reading = None
            self._auth_hung.discard(this)  # type: ignore[arg-type]
        self._auth, self._auth_at = headers, time.monotonic()
        return headers

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self._tls is not None and self._tls.server_hostname:
            options["server_hostname"] = self._tls.server_hostname
        if self._proxy:
            options["proxy"] = self._proxy
            if self._configuration.proxy_headers:
                options["proxy_headers"] = dict(self._configuration.proxy_headers)
        return options


async def _bounded_body(response: aiohttp.ClientResponse) -> bytes:
    """The whole body, decompressed, refused past MAX_ANSWER_BYTES (a broken proxy or server, a gzip bomb)
    before it is all in memory."""
    too_big = f"the API server's answer passes {MAX_ANSWER_BYTES // (1024 * 1024)} MiB: not a ResourceClaim"
    if (response.content_length or 0) > MAX_ANSWER_BYTES:
        raise RuntimeError(too_big)
    chunks, size = [], 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise RuntimeError(too_big)
        chunks.append(chunk)
    return b"".join(chunks)


def _retrieved(done: asyncio.Future[Any]) -> None:
    if not done.cancelled():
        done.exception()


@dataclass(frozen=True)
class TlsSettings:
    context: ssl.SSLContext
    server_hostname: str | None  # the name the server's certificate must carry, when not the host's


def tls_settings(configuration: k8s.Configuration) -> TlsSettings:
    """The SSL context and server name the client's urllib3 pool would use for this configuration."""
    context = ssl.create_default_context(
        cafile=configuration.ssl_ca_cert or None, cadata=getattr(configuration, "ca_cert_data", None) or None
    )
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    assert_hostname = getattr(configuration, "assert_hostname", None)
    if not configuration.verify_ssl or assert_hostname is False:
        context.check_hostname = False
    if not configuration.verify_ssl:
        context.verify_mode = ssl.CERT_NONE
    name = getattr(configuration, "tls_server_name", None) or (
        assert_hostname if isinstance(assert_hostname, str) else None
    )
    return TlsSettings(context, name or None)


def proxy_for(configuration: k8s.Configuration) -> str:
    """The proxy URL to send claim reads through ("" for none), as the client's no_proxy rules say."""
    proxy = configuration.proxy or ""
    if proxy and bypasses_proxy(configuration.host, getattr(configuration, "no_proxy", None) or ""):
        return ""
    return proxy


def bypasses_proxy(url: str, no_proxy: str) -> bool:
    """Whether `url`'s host matches a no_proxy entry: '*', a host (with or without :port), a domain
    ('.example.com' or 'example.com' also covers its subdomains), or an IP network in CIDR form."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*" or entry == parts.netloc.lower() or entry == host:
            return True
        if "/" in entry:
            try:
                if ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        elif host.endswith("." + entry.lstrip(".")):
            return True
    return False
