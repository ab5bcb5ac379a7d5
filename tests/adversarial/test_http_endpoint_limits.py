"""The HTTP endpoint under hostile or careless clients: backlog, bounded threads, timeouts, probes.

All over loopback, with small limits so each case stays fast. The 1 s probe bound is the kubelet's
default probe timeout: an answer later than that is a failed probe.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from device_plugin.observability.http_endpoint import EndpointProbeResult, HttpEndpoint, HttpLimits

PROBE_TIMEOUT_S = 1.0  # kubelet's default timeoutSeconds


def ok() -> EndpointProbeResult:
    return EndpointProbeResult(True, "fine")


class SlowCollector:
    """A real prometheus-client collector that takes `delay_s` per collect and counts its calls."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.calls = 0

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.calls += 1
        time.sleep(self.delay_s)
        yield GaugeMetricFamily("slow_gauge", "a gauge that is slow to read", value=1.0)


@contextlib.contextmanager
def endpoint(registry: CollectorRegistry | None = None, limits: HttpLimits | None = None) -> Iterator[HttpEndpoint]:
    served = HttpEndpoint(
        "127.0.0.1",
        0,
        registry or CollectorRegistry(),
        liveness=ok,
        readiness=ok,
        poll_interval_s=0.02,
        **({"limits": limits} if limits is not None else {}),
    )
    served.start()
    try:
        yield served
    finally:
        served.stop()


def probe(port: int, path: str = "/healthz", timeout_s: float = PROBE_TIMEOUT_S) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout_s) as reply:
        reply.read()
        return int(reply.status)


@contextlib.contextmanager
def idle_clients(port: int, count: int, first_bytes: bytes = b"") -> Iterator[list[socket.socket]]:
    """`count` connections that send `first_bytes` (maybe nothing) and then nothing more."""
    clients: list[socket.socket] = []
    try:
        for _ in range(count):
            client = socket.create_connection(("127.0.0.1", port), timeout=5)
            if first_bytes:
                client.sendall(first_bytes)
            clients.append(client)
        yield clients
    finally:
        for client in clients:
            client.close()


def reset(client: socket.socket) -> None:
    """Close with a TCP RST (linger 0), as a client that crashes or times out does."""
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()


@pytest.mark.skipif(not Path("/proc/sys/net/core/somaxconn").exists(), reason="needs Linux TCP_INFO")
def test_listen_backlog_is_a_real_one() -> None:
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    with endpoint() as served:
        listener = served.listening_socket()
        info = listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        # For a listening socket Linux reports the accept-queue limit in tcpi_sacked (offset 28).
        backlog = struct.unpack_from("I", info, 28)[0]
    assert backlog >= min(128, somaxconn)


@pytest.mark.parametrize(
    "first_bytes",
    [b"", b"GET /metrics HTTP/1.1\r\nHost: x\r\n"],
    ids=["idle-after-connect", "slowloris-partial-headers"],
)
def test_many_idle_clients_neither_add_threads_nor_delay_probes(first_bytes: bytes) -> None:
    with endpoint() as served:
        before = threading.active_count()
        with idle_clients(served.port, 150, first_bytes):
            status = probe(served.port)
            added = threading.active_count() - before
    assert (status, added <= 2) == (200, True), f"{added} threads added for 150 idle clients"


def test_when_connections_are_full_stale_ones_make_room_for_probes() -> None:
    limits = HttpLimits(max_connections=8, evict_after_s=0.2, request_timeout_s=30.0)
    with endpoint(limits=limits) as served, idle_clients(served.port, 8, b"GET / HTTP/1.1\r\n"):
        assert probe(served.port) == 200


@pytest.mark.parametrize(
    "first_bytes",
    [b"", b"GET /metrics HTTP/1.1\r\n"],
    ids=["silent", "headers-never-finished"],
)
def test_a_slow_client_is_dropped_after_the_request_timeout(first_bytes: bytes) -> None:
    with endpoint(limits=HttpLimits(request_timeout_s=0.2)) as served, idle_clients(served.port, 1, first_bytes) as c:
        c[0].settimeout(10)
        assert c[0].recv(1024) == b""  # the server closed it, long before our 10 s


def test_oversized_headers_are_refused() -> None:
    padded = b"GET /healthz HTTP/1.1\r\nX-Pad: " + b"a" * 4096 + b"\r\n\r\n"
    with endpoint(limits=HttpLimits(max_header_bytes=1024)) as served, idle_clients(served.port, 1, padded) as c:
        c[0].settimeout(10)
        assert c[0].recv(1024).startswith(b"HTTP/1.1 431")


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET /met", b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"],
    ids=["before-request", "mid-request", "after-request"],
)
def test_a_client_that_leaves_writes_no_error_or_traceback(
    sent: bytes, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    registry = CollectorRegistry()
    registry.register(SlowCollector(0.05))
    caplog.set_level(logging.DEBUG)
    with endpoint(registry) as served:
        for _ in range(5):
            client = socket.create_connection(("127.0.0.1", served.port), timeout=5)
            if sent:
                client.sendall(sent)
            reset(client)
        assert probe(served.port) == 200  # the server went on
        time.sleep(0.2)  # let the server see the resets
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    err = capfd.readouterr().err
    assert (loud, "Traceback" in err) == ([], False), err


def test_probes_do_not_wait_behind_a_metrics_storm_and_renders_are_shared() -> None:
    slow = SlowCollector(0.5)
    registry = CollectorRegistry()
    registry.register(slow)
    with endpoint(registry) as served:
        calls_at_start = slow.calls  # registering may collect once to learn the names
        results: list[int] = []
        scrapers = [
            threading.Thread(target=lambda: results.append(probe(served.port, "/metrics", timeout_s=30)))
            for _ in range(20)
        ]
        for thread in scrapers:
            thread.start()
        time.sleep(0.1)  # the storm is rendering
        status = probe(served.port, "/readyz")
        for thread in scrapers:
            thread.join()
    renders = slow.calls - calls_at_start
    assert (status, results.count(200)) == (200, 20)
    assert renders <= 3, f"{renders} renders for 20 concurrent scrapes"


def test_thread_count_stays_bounded_under_a_scrape_storm() -> None:
    with endpoint() as served:
        before = threading.active_count()
        peak = [0]
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], threading.active_count())
                time.sleep(0.005)

        watcher = threading.Thread(target=watch)
        watcher.start()
        clients = []
        for _ in range(200):
            client = socket.create_connection(("127.0.0.1", served.port), timeout=10)
            client.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            clients.append(client)
        replies = [c.recv(16) for c in clients]
        for client in clients:
            client.close()
        stop.set()
        watcher.join()
    assert all(r.startswith(b"HTTP/1.1 200") for r in replies)
    assert peak[0] - before <= 3, f"{peak[0] - before} threads at peak"


if sys.platform != "linux":  # pragma: no cover - the tests rely on Linux loopback behaviour
    pytestmark = pytest.mark.skip("Linux only")


# Runs in its own process: it lowers the descriptor limit and uses up every descriptor for a moment.
_OUT_OF_DESCRIPTORS = """
import os, resource, socket
from prometheus_client import CollectorRegistry
from device_plugin.observability.http_endpoint import EndpointProbeResult, HttpEndpoint

def ok():
    return EndpointProbeResult(True, "fine")

served = HttpEndpoint("127.0.0.1", 0, CollectorRegistry(), liveness=ok, readiness=ok, poll_interval_s=0.02)
served.start()
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
client = socket.socket()
client.settimeout(3.0)
fillers = []
try:
    while True:
        fillers.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
client.connect(("127.0.0.1", served.port))  # accept() now fails with EMFILE
__import__("time").sleep(0.5)  # the endpoint meets EMFILE meanwhile
for fd in fillers:
    os.close(fd)
client.sendall(b"GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
try:
    print(client.recv(64).decode("latin-1").split("\\r\\n")[0])
except TimeoutError:
    print("no answer")
served.stop()
"""


def test_running_out_of_descriptors_for_a_moment_does_not_end_the_endpoint() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _OUT_OF_DESCRIPTORS],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.stdout.strip() == "HTTP/1.1 200 OK", done.stderr[-2000:]
