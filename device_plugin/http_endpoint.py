"""The plugin's HTTP endpoint: /metrics, /healthz and /readyz on one port.

Boundary: it serves what it is given (a CollectorRegistry and two probe callables) and knows nothing
about gRPC, NVML or the kubelet. Default address DEFAULT_METRICS_ADDRESS (":2112"):
- outside 9100-9999, the Prometheus exporter range that is fully allocated (9400 is dcgm-exporter,
  9100 node-exporter, both common on GPU nodes);
- outside the kubelet/kube-proxy ports (10248-10259) and 8080/8081 (controller-runtime metrics and
  probes, often on hostNetwork);
- 2112 is the port Prometheus client examples use, so operators recognise it as a metrics port.
An empty address (env METRICS_ADDRESS="") turns the endpoint off.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from device_plugin.errors import ConfigError

log = logging.getLogger(__name__)

METRICS_ADDRESS_ENV = "METRICS_ADDRESS"


@dataclass(frozen=True)
class EndpointProbeResult:
    ok: bool
    detail: str  # one line, shown in the probe's response body


Probe = Callable[[], EndpointProbeResult]


def parse_metrics_address(text: str, field: str = "metrics-address") -> tuple[str, int] | None:
    """ "HOST:PORT", ":PORT" (all interfaces) or "[v6]:PORT" -> (host, port); "" -> None (disabled)."""
    text = text.strip()
    if not text:
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ConfigError(field, f"{text!r} is not HOST:PORT (e.g. ':2112' or '127.0.0.1:2112')")
    port = int(port_text)
    if port > 65535:
        raise ConfigError(field, f"port {port} is out of range 0-65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def registration_readiness(states: Callable[[], Mapping[str, str]]) -> Probe:
    """Ready when at least one resource exists and every resource is "registered" with the kubelet.

    `states` is e.g. PluginMetrics.registration_snapshot (resource -> state)."""

    def probe() -> EndpointProbeResult:
        current = states()
        if not current:
            return EndpointProbeResult(False, "no resource registered with the kubelet yet")
        pending = sorted(f"{name}={state}" for name, state in current.items() if state != "registered")
        if pending:
            return EndpointProbeResult(False, "not registered: " + ", ".join(pending))
        return EndpointProbeResult(True, "registered: " + ", ".join(sorted(current)))

    return probe


class HttpEndpoint:
    """A threaded HTTP server; `start()` binds (port 0 picks a free one, see `port`), `stop()` closes."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        *,
        liveness: Probe,
        readiness: Probe,
        poll_interval_s: float = 0.5,
    ) -> None:
        """`poll_interval_s` bounds how long stop() waits for the serving loop (and how often it wakes idle)."""
        self._address = (host, port)
        self._poll_interval_s = poll_interval_s
        self._registry = registry
        self._probes = {"/healthz": liveness, "/readyz": readiness}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("HttpEndpoint is not started")
        return int(self._server.server_address[1])

    def start(self) -> None:
        if self._server is not None:
            return
        server_class = _Server6 if ":" in self._address[0] else _Server
        server = server_class(self._address, _Handler)
        server.endpoint = self
        server.daemon_threads = True  # a hung scraper must not block shutdown
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(self._poll_interval_s,), name="http-endpoint", daemon=True
        )
        self._thread.start()
        log.info("HTTP endpoint serving /metrics, /healthz, /readyz on %s:%d", self._address[0] or "*", self.port)

    def stop(self) -> None:
        """Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # ---- request handling (called on the server's threads) ----------------------------------

    def respond(self, path: str, accept: str | None) -> tuple[int, str, bytes]:
        """(status, content type, body) for GET `path`."""
        route = path.split("?", 1)[0]
        if route == "/metrics":
            encoder, content_type = choose_encoder(accept or "")
            return 200, content_type, encoder(self._registry)
        probe = self._probes.get(route)
        if probe is None:
            return 404, "text/plain; charset=utf-8", b"not found: try /metrics, /healthz or /readyz\n"
        try:
            result = probe()
        except Exception as error:  # a broken probe reports unhealthy; it must not kill the server thread
            log.exception("probe %s raised", route)
            result = EndpointProbeResult(False, f"probe raised {type(error).__name__}: {error}")
        status = 200 if result.ok else 503
        return status, "text/plain; charset=utf-8", (("ok: " if result.ok else "") + result.detail + "\n").encode()


class _Server(ThreadingHTTPServer):
    endpoint: HttpEndpoint
    allow_reuse_address = True  # restart on the same port without waiting out TIME_WAIT


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        try:
            status, content_type, body = self.server.endpoint.respond(self.path, self.headers.get("Accept"))
        except Exception as error:
            log.exception("serving %s failed", self.path)
            status, content_type, body = 500, "text/plain; charset=utf-8", f"{type(error).__name__}: {error}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        # Scrapes every 15 s per target would flood the plugin's log; keep them at debug.
        log.debug("%s %s", self.address_string(), format % args)
