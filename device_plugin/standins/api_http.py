"""The API stand-in's HTTP side: one thread per request, JSON in and out, watch streams.

Parses the request, hands it to the stand-in (ApiSide: api_server.ApiStandin) and writes its answer;
holds each answer for the stand-in's configured delays, outside its lock, as a slow server would.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from device_plugin.standins.api_objects import status_body


class ApiSide(Protocol):
    delay_s: float
    claim_read_delay_s: float
    answer_delay_s: float
    watch_status: int

    def serving(self, server: object) -> bool: ...

    def record(self, method: str, path: str) -> None: ...

    def handle(
        self, method: str, path: str, query: dict[str, str], body: Any, content_type: str = ...
    ) -> tuple[int, Any]: ...

    def watch(
        self, query: dict[str, str], write: Callable[[bytes], None], serving: Callable[[], bool]
    ) -> None: ...


class Server(ThreadingHTTPServer):
    # the default 5 drops bursts of connections (a 1 s SYN retry), as no API server does
    request_queue_size = 128
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer (a driver killed) is no error of the server's: said
        nothing of."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def handler_for(api: ApiSide) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        pass

    Handler.api = api
    return Handler


class _Handler(BaseHTTPRequestHandler):
    api: ApiSide
    protocol_version = "HTTP/1.1"
    # headers and body go out as separate writes: no 40 ms delayed-ACK stall
    disable_nagle_algorithm = True

    def _serve(self) -> None:
        if not self.api.serving(self.server):  # a kept-alive connection to a server that went down
            self.close_connection = True
            return
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if (
            self.command == "GET"
            and "/resourceclaims/" in url.path
            and self.api.claim_read_delay_s > 0
        ):
            # outside the lock: slow reads overlap, as on a real server
            time.sleep(self.api.claim_read_delay_s)
        if self.api.delay_s > 0:
            time.sleep(self.api.delay_s)  # every request, outside the lock as well
        if self.command == "GET" and query.get("watch") in ("true", "1"):
            self._watch(url.path, query)
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        content_type = self.headers.get("Content-Type") or ""
        status, answer = self.api.handle(self.command, url.path, query, body, content_type)
        if self.command in ("POST", "PUT") and self.api.answer_delay_s > 0:
            # stored, but answered late: its watch event arrives first
            time.sleep(self.api.answer_delay_s)
        self._answer(status, answer)

    def _answer(self, status: int, answer: Any) -> None:
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _watch(self, path: str, query: dict[str, str]) -> None:
        self.api.record("WATCH", path)
        self.close_connection = True  # the stream ends with the connection (no length, no chunks)
        if self.api.watch_status != 200:  # e.g. 403: RBAC without the watch verb
            self._answer(self.api.watch_status, status_body(self.api.watch_status, "watch refused"))
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()

        def write(data: bytes) -> None:
            self.wfile.write(data)
            self.wfile.flush()

        with contextlib.suppress(OSError):  # the client went away
            self.api.watch(query, write, lambda: self.api.serving(self.server))

    do_GET = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read `requests` instead
        pass
