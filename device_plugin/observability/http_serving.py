"""Connection handling for the HTTP endpoint: one event-loop thread, bounded in every dimension.

Boundary: bytes in, bytes out. It parses one GET per connection and hands the path to an async
`respond` callable; it knows nothing about metrics or probes
(device_plugin/observability/http_endpoint.py does).

Why an event loop rather than a thread per connection: an idle or slow client then costs a file
descriptor and a few KiB, not a thread, so a thousand of them cannot starve the kubelet's probes.
Limits (HttpLimits): a real listen backlog; at most `max_connections` open at once (more wait in the
backlog); when full, a connection still sending its request after `evict_after_s` is closed to make
room, so slowloris clients cannot lock probes out; the whole request must arrive within
`request_timeout_s` and the reply must be taken within `write_timeout_s`. A client that leaves is
logged at DEBUG only. A failed accept (out of descriptors) is retried shortly, never the end of
serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HttpLimits:
    backlog: int = max(128, socket.SOMAXCONN)  # the kernel caps it at net.core.somaxconn
    max_connections: int = 256
    request_timeout_s: float = 5.0  # request line and headers, in total
    write_timeout_s: float = 5.0  # the whole reply
    evict_after_s: float = 0.25  # when full: close connections still reading after this long
    max_header_bytes: int = 8192


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes


# pause after a failed accept (out of descriptors or memory) before the next try
ACCEPT_RETRY_S = 0.1
# (method, path, headers) -> Reply
Responder = Callable[[str, str, dict[str, str]], Awaitable[Reply]]
_CLIENT_GONE = (ConnectionError, asyncio.IncompleteReadError, TimeoutError, OSError)


@dataclass(eq=False)
class _Connection:
    task: asyncio.Task[None] | None = None
    opened: float = field(default_factory=time.monotonic)
    reading: bool = True


class ConnectionServer:
    """Serves `respond` on an already listening, non-blocking socket until `close()`."""

    def __init__(self, listener: socket.socket, respond: Responder, limits: HttpLimits) -> None:
        self._listener = listener
        self._respond = respond
        self._limits = limits
        self._connections: set[_Connection] = set()
        self._room = asyncio.Event()

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(_quiet_exception_handler)
        accept_failing = False
        try:
            while True:
                while len(self._connections) >= self._limits.max_connections:
                    self._evict_stale_readers()
                    self._room.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._room.wait(), self._limits.evict_after_s / 2)
                try:
                    client, _ = await loop.sock_accept(self._listener)
                # EMFILE, ENOBUFS, ...: the next connection may fit; never end serving
                except OSError as error:
                    level = logging.DEBUG if accept_failing else logging.WARNING  # once per episode
                    log.log(level, "HTTP endpoint cannot accept a connection (%s); retrying", error)
                    accept_failing = True
                    await asyncio.sleep(ACCEPT_RETRY_S)  # the listener stays readable: no busy loop
                    continue
                accept_failing = False
                connection = _Connection()
                connection.task = loop.create_task(self._serve_one(client, connection))
                self._connections.add(connection)
        finally:
            tasks = [c.task for c in self._connections if c.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _evict_stale_readers(self) -> None:
        now = time.monotonic()
        stale = [
            c
            for c in self._connections
            if c.reading and now - c.opened >= self._limits.evict_after_s
        ]
        for connection in stale:
            connection.reading = False
            if connection.task is not None:
                connection.task.cancel()
        if stale:
            log.debug(
                "HTTP endpoint full: closed %d connections still sending their request", len(stale)
            )

    async def _serve_one(self, client: socket.socket, connection: _Connection) -> None:
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_connection(
                sock=client, limit=self._limits.max_header_bytes
            )
            try:
                head = await asyncio.wait_for(
                    reader.readuntil(b"\r\n\r\n"), self._limits.request_timeout_s
                )
            except asyncio.LimitOverrunError:
                reply = Reply(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                    "text/plain",
                    b"request headers too large\n",
                )
                method = "GET"
            else:
                connection.reading = False
                method, path, headers = _parse(head)
                reply = await self._respond(method, path, headers) if method else _BAD_REQUEST
            connection.reading = False
            writer.write(_encode(reply, head_only=method == "HEAD"))
            await asyncio.wait_for(writer.drain(), self._limits.write_timeout_s)
        except asyncio.CancelledError:
            log.debug("HTTP connection closed early (endpoint full or stopping)")
        except _CLIENT_GONE as error:  # the client left, stalled or reset: nothing to report
            log.debug("HTTP client gone: %s", type(error).__name__)
        finally:
            self._connections.discard(connection)
            self._room.set()
            if writer is not None:
                # no lingering close handshake with a client that may be gone
                writer.transport.abort()
            else:
                client.close()


def _parse(head: bytes) -> tuple[str, str, dict[str, str]]:
    """(method, path, lower-cased headers); method "" when the request line is not HTTP."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return "", "", {}
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], headers


def _encode(reply: Reply, *, head_only: bool) -> bytes:
    reason = HTTPStatus(reply.status).phrase
    head = (
        f"HTTP/1.1 {reply.status} {reason}\r\nContent-Type: {reply.content_type}\r\n"
        f"Content-Length: {len(reply.body)}\r\nConnection: close\r\n\r\n"
    ).encode("latin-1")
    return head if head_only else head + reply.body


_BAD_REQUEST = Reply(HTTPStatus.BAD_REQUEST, "text/plain", b"not an HTTP request\n")


def _quiet_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    """Transport errors from clients that vanished are DEBUG; anything else is a bug worth an
    ERROR."""
    error = context.get("exception")
    if isinstance(error, _CLIENT_GONE):
        log.debug("HTTP client gone: %s", context.get("message"))
        return
    loop.default_exception_handler(context)
