"""A grpc.aio server on the shared serving loop, bound to one unix socket, driven from any thread.

Boundary: gRPC's server object only; which services it carries is the caller's `add_services`, and
where the socket goes and with which mode is socket_files' business (start binds the path given).
A grpc.aio server cannot start again once stopped, so each start builds a fresh one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import grpc

from device_plugin.serving import event_loop

log = logging.getLogger(__name__)

START_TIMEOUT_S = 10.0
AddServices = Callable[[grpc.aio.Server], None]


class AioSocketServer:
    """`add_services` puts the servicers on each fresh server; `label` names it in log lines."""

    def __init__(self, label: str, add_services: AddServices) -> None:
        self.label = label
        self._add_services = add_services
        self._server: grpc.aio.Server | None = None

    def start(self, path: Path) -> None:
        """Bind `path` and serve. RuntimeError when gRPC cannot bind it."""
        self._server = event_loop.run(self._start(path), timeout_s=START_TIMEOUT_S)

    async def _start(self, path: Path) -> grpc.aio.Server:
        server = grpc.aio.server()
        self._add_services(server)
        # "unix:<path>", not "unix://<path>": gRPC takes two bytes off the limit for the latter.
        server.add_insecure_port(f"unix:{path}")
        await server.start()
        return server

    def stop(self, grace_s: float) -> None:
        """Stop serving within about `grace_s` (calls still running are cancelled after it)."""
        server, self._server = self._server, None
        if server is not None:
            try:
                event_loop.run(server.stop(grace_s), timeout_s=grace_s + 1.0)
            except TimeoutError:
                log.warning("the server for %s did not stop within %.1f s", self.label, grace_s)

    def stop_soon(self, grace_s: float) -> None:
        """Stop within `grace_s` without waiting here (a replaced socket's calls may finish
        meanwhile)."""
        server, self._server = self._server, None
        if server is not None:
            event_loop.schedule(server.stop(grace_s))
