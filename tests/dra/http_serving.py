"""A plain HTTP server on 127.0.0.1 in a thread, for the tests that stand in for an API server that
misbehaves in ways the API stand-in does not (held answers, oversized bodies, recorded headers, TLS).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 (connections kept, as the API server's are), no request log; `answer_json` sends a body."""

    protocol_version = "HTTP/1.1"

    def answer_json(self, obj: object) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def http_server(
    handler: type[BaseHTTPRequestHandler], wrap: Callable[[socket.socket], socket.socket] | None = None
) -> Iterator[int]:
    """Serve `handler` (its listening socket passed through `wrap` first, e.g. for TLS); yields the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if wrap is not None:
        server.socket = wrap(server.socket)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
