"""A small client of the real API server for bulk work (hundreds of nodes, slices, pods), as the admin.

kubectl costs a process per call, which a benchmark creating a thousand objects cannot afford; this speaks
HTTPS with the admin's client certificate, one connection per thread, and fans out over a thread pool.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlparse

from testbed.realnode.control_plane import ControlPlane


class RestError(Exception):
    pass


class Rest:
    def __init__(self, plane: ControlPlane, workers: int = 8) -> None:
        self._host = urlparse(plane.server).hostname or "127.0.0.1"
        self._port = urlparse(plane.server).port or 443
        self._context = plane.ssl_context()
        self._local = threading.local()
        self.workers = workers

    def _connection(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPSConnection(self._host, self._port, context=self._context)
        return conn

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        for attempt in (1, 2):  # a connection the server closed while idle: once more on a fresh one
            conn = self._connection()
            try:
                conn.request(method, path, body=data, headers=headers)
                answer = conn.getresponse()
                payload = answer.read()
            except (http.client.HTTPException, OSError):
                self._local.conn = None
                if attempt == 2:
                    raise
                continue
            if answer.status >= 400 and not (method == "DELETE" and answer.status == 404):
                raise RestError(f"{method} {path}: HTTP {answer.status}: {payload[:300]!r}")
            return json.loads(payload) if payload else None
        return None

    def each(self, calls: Iterable[tuple[str, str, Any]]) -> list[Any]:
        """(method, path, body) calls over the pool; the answers in order (the first failure raises)."""
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(lambda c: self.call(*c), calls))

    def merge_patch(self, path: str, body: Any) -> Any:
        return self.call("PATCH", path, body, "application/merge-patch+json")
