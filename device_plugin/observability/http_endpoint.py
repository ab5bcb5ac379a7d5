"""The plugin's HTTP endpoint: /metrics, /healthz and /readyz on one port.

Boundary: it serves what it is given (a CollectorRegistry and two probe callables) and knows nothing
about gRPC, NVML or the kubelet. Default address DEFAULT_METRICS_ADDRESS (":2112"):
- outside 9100-9999, the Prometheus exporter range that is fully allocated (9400 is dcgm-exporter,
  9100 node-exporter, both common on GPU nodes);
- outside the kubelet/kube-proxy ports (10248-10259) and 8080/8081 (controller-runtime metrics and
  probes, often on hostNetwork);
- 2112 is the port Prometheus client examples use, so operators recognise it as a metrics port.
An empty address (env METRICS_ADDRESS="") turns the endpoint off.

Fit for a node agent (limits in device_plugin/observability/http_serving.py): idle, slow or
vanishing clients cost no thread and no log noise; probes run on their own worker, never behind a
/metrics render; concurrent
scrapes share one render (one worker thread), so a scrape storm costs at most one core-share.
Threads: three, whatever the load. A port that cannot be bound raises EndpointBindError (the daemon
exits 1).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import socket
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from http import HTTPStatus
from typing import TypeVar

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from device_plugin.core.ascii_digits import is_ascii_digits
from device_plugin.core.errors import ConfigError, PluginError
from device_plugin.observability.http_serving import ConnectionServer, HttpLimits, Reply

__all__ = [
    "EndpointBindError",
    "EndpointProbeResult",
    "HttpEndpoint",
    "HttpLimits",
    "parse_metrics_address",
    "registration_readiness",
]

log = logging.getLogger(__name__)

# under the DaemonSet's 2 s probe timeout, above the 1 s servicer self-probe (its reason wins)
PROBE_TIMEOUT_S = 1.5
PROBE_QUEUE_MAX = 32  # probes waiting for the probe worker; more are answered 503 at once
TEXT = "text/plain; charset=utf-8"
T = TypeVar("T")


class EndpointBindError(PluginError):
    """The metrics address cannot be bound (port taken, address not local, no permission)."""


@dataclass(frozen=True)
class EndpointProbeResult:
    ok: bool
    detail: str  # one line, shown in the probe's response body


Probe = Callable[[], EndpointProbeResult]


def parse_metrics_address(text: str, field: str = "metrics-address") -> tuple[str, int] | None:
    """ "HOST:PORT", ":PORT" (all interfaces) or "[v6]:PORT" -> (host, port); "" -> None
    (disabled)."""
    text = text.strip()
    if not text:
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep or not is_ascii_digits(port_text):
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
        pending = sorted(
            f"{name}={state}" for name, state in current.items() if state != "registered"
        )
        if pending:
            return EndpointProbeResult(False, "not registered: " + ", ".join(pending))
        return EndpointProbeResult(True, "registered: " + ", ".join(sorted(current)))

    return probe


class HttpEndpoint:
    """`start()` binds (port 0 picks a free one, see `port`) and serves on its own threads; `stop()`
    closes."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        *,
        liveness: Probe,
        readiness: Probe,
        poll_interval_s: float = 0.5,
        limits: HttpLimits | None = None,
    ) -> None:
        """`poll_interval_s` bounds how long stop() waits for each serving thread to finish."""
        self._address = (host, port)
        self._poll_interval_s = poll_interval_s
        self._limits = limits or HttpLimits()
        self._registry = registry
        self._probes = {"/healthz": liveness, "/readyz": readiness}
        self._listener: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._metrics_worker = _Worker("http-metrics")
        self._probe_worker = _Worker("http-probes")
        # content type -> render in flight (loop thread)
        self._renders: dict[str, asyncio.Future[bytes]] = {}

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("HttpEndpoint is not started")
        return int(self._listener.getsockname()[1])

    def listening_socket(self) -> socket.socket:
        if self._listener is None:
            raise RuntimeError("HttpEndpoint is not started")
        return self._listener

    def start(self) -> None:
        """Binds now, in the caller's thread: a taken port raises EndpointBindError here."""
        if self._listener is not None:
            return
        host, port = self._address
        listener = socket.socket(
            socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM
        )
        try:
            # restart without waiting out TIME_WAIT
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host, port))
            listener.listen(self._limits.backlog)
        except OSError as error:
            listener.close()
            where = f"{host or '*'}:{port}"
            raise EndpointBindError(
                f"cannot listen on {where} for /metrics, /healthz, /readyz: {error}"
            ) from error
        listener.setblocking(False)
        self._listener = listener
        self._metrics_worker.start()
        self._probe_worker.start()
        self._loop = asyncio.new_event_loop()
        server = ConnectionServer(listener, self._respond, self._limits)
        self._thread = threading.Thread(
            target=self._serve, args=(server,), name="http-endpoint", daemon=True
        )
        self._thread.start()
        log.info(
            "HTTP endpoint serving /metrics, /healthz, /readyz on %s:%d", host or "*", self.port
        )

    def stop(self) -> None:
        """Idempotent. Open connections are dropped; a render still running finishes on its own
        thread."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(_cancel_all, loop)
            thread.join(timeout=max(1.0, self._poll_interval_s))
        listener.close()
        self._metrics_worker.stop(self._poll_interval_s)
        self._probe_worker.stop(self._poll_interval_s)
        self._loop = self._thread = None

    def _serve(self, server: ConnectionServer) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(server.serve())
        except asyncio.CancelledError:
            pass
        finally:  # let cancelled connections abort their transports before the loop goes
            leftover = asyncio.all_tasks(self._loop)
            self._loop.run_until_complete(
                asyncio.gather(*leftover, asyncio.sleep(0), return_exceptions=True)
            )
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    # ---- request handling (on the event loop) ---------------------------------------------------

    async def _respond(self, method: str, path: str, headers: dict[str, str]) -> Reply:
        if method not in ("GET", "HEAD"):
            return Reply(HTTPStatus.METHOD_NOT_ALLOWED, TEXT, b"only GET and HEAD\n")
        route = path.split("?", 1)[0]
        if route == "/metrics":
            encoder, content_type = choose_encoder(headers.get("accept", ""))
            try:
                return Reply(HTTPStatus.OK, content_type, await self._render(content_type, encoder))
            except Exception as error:  # a collector bug: the scrape fails, the endpoint lives
                log.error("rendering /metrics failed: %s: %s", type(error).__name__, error)
                return Reply(
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    TEXT,
                    f"{type(error).__name__}: {error}\n".encode(),
                )
        probe = self._probes.get(route)
        if probe is None:
            return Reply(
                HTTPStatus.NOT_FOUND, TEXT, b"not found: try /metrics, /healthz or /readyz\n"
            )
        result = await self._run_probe(route, probe)
        body = (("ok: " if result.ok else "") + result.detail + "\n").encode()
        return Reply(HTTPStatus.OK if result.ok else HTTPStatus.SERVICE_UNAVAILABLE, TEXT, body)

    async def _render(
        self, content_type: str, encoder: Callable[[CollectorRegistry], bytes]
    ) -> bytes:
        """Scrapes that arrive while a render runs share it: N concurrent scrapes, one render."""
        render = self._renders.get(content_type)
        if render is None:
            render = asyncio.wrap_future(
                self._metrics_worker.submit(lambda: encoder(self._registry))
            )
            self._renders[content_type] = render
            render.add_done_callback(lambda _: self._renders.pop(content_type, None))
        return await asyncio.shield(render)

    async def _run_probe(self, route: str, probe: Probe) -> EndpointProbeResult:
        if self._probe_worker.pending() >= PROBE_QUEUE_MAX:
            return EndpointProbeResult(False, "probe worker busy: earlier probes have not returned")
        try:
            return await asyncio.wait_for(
                asyncio.wrap_future(self._probe_worker.submit(probe)), PROBE_TIMEOUT_S
            )
        except TimeoutError:
            return EndpointProbeResult(False, f"probe did not answer within {PROBE_TIMEOUT_S:g} s")
        except Exception as error:  # a broken probe reports unhealthy; it must not kill the server
            log.error("probe %s raised %s: %s", route, type(error).__name__, error)
            return EndpointProbeResult(False, f"probe raised {type(error).__name__}: {error}")


class _Worker:
    """One daemon thread running submitted calls in order (no executor: its exit-join could hang
    us)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: queue.SimpleQueue[tuple[Callable[[], object], Future[object]] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        if self._thread is not None:
            self._calls.put(None)
            self._thread.join(timeout=timeout_s)
            self._thread = None

    def pending(self) -> int:
        return self._calls.qsize()

    def submit(self, call: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._calls.put((call, future))  # type: ignore[arg-type]
        return future

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            call, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as error:  # handed to the awaiting request
                future.set_exception(error)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()
