"""Observability figures: /metrics scrape latency over HTTP, the endpoint under a scrape storm and idle
clients, and the daemon's idle CPU and resident memory.

    .venv/bin/python benchmarks/bench_observability.py [--machine island-16gpu] [--scrapes 500] [--idle-s 10]
        [--storm 1000] [--idle-clients 500]

Scrape: a fake machine's resource with every metric populated (allocations, decisions of every size,
health flaps with Xids, replica info for 8 replicas per GPU, GPU gauges), scraped sequentially from
this process over a fresh TCP connection each time, as Prometheus does per target.
Daemon: `gpu-device-plugin run --machine dgx1-v100 --device-plugin-dir <tmp>` as a subprocess (no
kubelet: it keeps retrying registration, which is its real idle state on a node whose kubelet is
down); CPU from /proc/<pid>/stat utime+stime over the idle window, RSS from /proc/<pid>/status.
Storm: `--storm` concurrent scrapes from one asyncio client (each its own connection, 10 s client
timeout): how many got 200, their latency, the endpoint's threads; then `--idle-clients` connections that
send nothing, and /healthz latency over fresh connections while they stay open. Target (issue 11): every
storm scrape answered, probes under 1 s with the idle clients open, threads not growing with clients.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from prometheus_client import CollectorRegistry

from device_plugin.allocation.resources import ResourceManager
from device_plugin.core.devices import Device, Health
from device_plugin.health.state import HealthTransition
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.telemetry import GpuTelemetry, TelemetrySource
from device_plugin.observability.http_endpoint import EndpointProbeResult, HttpEndpoint, registration_readiness
from device_plugin.observability.metrics import PluginMetrics
from testbed.allocation_doubles import EnvVarResponseBuilder, LowestIndexPolicy

RESOURCE = "nvidia.com/gpu"
REPO = Path(__file__).resolve().parent.parent


class _StaticTelemetry:
    """Used only when FakeNvml has no telemetry() yet: fixed readings so the gauges exist."""

    def telemetry(self, index: int) -> GpuTelemetry:
        return GpuTelemetry(index, 81920, 1024, 12.0, 40.0, 90.0)


def populated_metrics(machine: str) -> tuple[CollectorRegistry, PluginMetrics, str]:
    backend = FakeNvml.from_machine(machine)
    gpus = backend.gpus()
    devices = [Device(g.uuid, (g.index,), g.numa_node) for g in gpus]
    rm = ResourceManager(RESOURCE, devices, LowestIndexPolicy(), EnvVarResponseBuilder())
    source: TelemetrySource = backend if isinstance(backend, TelemetrySource) else _StaticTelemetry()
    note = "FakeNvml.telemetry" if source is backend else "static stand-in (FakeNvml has no telemetry())"
    registry = CollectorRegistry()
    metrics = PluginMetrics(
        registry, device_snapshots=lambda: {RESOURCE: rm.snapshot()}, gpus=lambda: gpus, telemetry=source
    )
    metrics.registration_state(RESOURCE, "registered")
    for i in range(1000):
        size = 1 + i % len(gpus)
        metrics.allocation_decision(RESOURCE, size, 25.0 * size, optimal=i % 7 != 0, best_ring_bandwidth_gbps=200.0)
        metrics.preferred_allocation(RESOURCE, "ok")
        metrics.allocation(RESOURCE, "ok")
        metrics.observe_rpc("Allocate", RESOURCE, "OK", 0.0002 + (i % 10) * 0.0001)
        metrics.observe_rpc("GetPreferredAllocation", RESOURCE, "OK", 0.0003)
    for xid in (13, 31, 43, 48, 63, 64, 74, 79):
        for transition in (
            HealthTransition(xid % len(gpus), Health.HEALTHY, Health.UNHEALTHY, f"Xid {xid}", 0.0, xid),
            HealthTransition(xid % len(gpus), Health.UNHEALTHY, Health.HEALTHY, "recovered", 1.0),
        ):
            changed = rm.on_health_transition(transition)
            metrics.health_transition(transition, [RESOURCE] if changed else [])
    for gpu in gpus:
        for replica in range(8):
            metrics.replica_info(RESOURCE + ".shared", f"{gpu.uuid}::{replica}", gpu.uuid)
    return registry, metrics, note


def bench_scrape(machine: str, scrapes: int) -> None:
    registry, metrics, note = populated_metrics(machine)
    endpoint = HttpEndpoint(
        "127.0.0.1",
        0,
        registry,
        liveness=lambda: EndpointProbeResult(True, "bench"),
        readiness=registration_readiness(metrics.registration_snapshot),
    )
    endpoint.start()
    url = f"http://127.0.0.1:{endpoint.port}/metrics"
    try:
        size = len(urllib.request.urlopen(url, timeout=10).read())
        latencies_ms = []
        for _ in range(scrapes):
            started = time.perf_counter()
            with urllib.request.urlopen(url, timeout=10) as response:
                response.read()
            latencies_ms.append((time.perf_counter() - started) * 1000)
    finally:
        endpoint.stop()
    cuts = statistics.quantiles(latencies_ms, n=100)
    print(f"scrape [{machine}, telemetry: {note}]: {scrapes} scrapes, {size} bytes/scrape")
    print(f"  p50 {cuts[49]:.2f} ms   p99 {cuts[98]:.2f} ms   max {max(latencies_ms):.2f} ms")


async def _scrape_once(port: int, path: str, timeout_s: float) -> tuple[bool, float]:
    started = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout_s)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
        reply = await asyncio.wait_for(reader.read(), timeout_s)
        writer.close()
        return reply.startswith(b"HTTP/1.1 200"), (time.perf_counter() - started) * 1000
    except (OSError, TimeoutError):
        return False, (time.perf_counter() - started) * 1000


async def _storm(port: int, count: int) -> list[tuple[bool, float]]:
    return list(await asyncio.gather(*(_scrape_once(port, "/metrics", 10.0) for _ in range(count))))


def bench_storm(machine: str, storm: int, idle_clients: int) -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    storm, idle_clients = min(storm, soft // 3), min(idle_clients, soft // 3)  # both ends' sockets are ours
    registry, metrics, _ = populated_metrics(machine)
    endpoint = HttpEndpoint(
        "127.0.0.1",
        0,
        registry,
        liveness=lambda: EndpointProbeResult(True, "bench"),
        readiness=registration_readiness(metrics.registration_snapshot),
    )
    endpoint.start()
    threads_before = threading.active_count()
    idle: list[socket.socket] = []
    try:
        started = time.perf_counter()
        results = asyncio.run(_storm(endpoint.port, storm))
        wall_s = time.perf_counter() - started
        answered = [ms for ok, ms in results if ok]
        print(f"storm [{machine}]: {storm} concurrent scrapes: {len(answered)} answered 200 in {wall_s:.2f} s")
        if len(answered) >= 2:
            cuts = statistics.quantiles(answered, n=100)
            print(f"  p50 {cuts[49]:.1f} ms   p99 {cuts[98]:.1f} ms   max {max(answered):.1f} ms")
        for _ in range(idle_clients):
            idle.append(socket.create_connection(("127.0.0.1", endpoint.port), timeout=5))
        probes = [asyncio.run(_scrape_once(endpoint.port, "/healthz", 5.0)) for _ in range(20)]
        ok_ms = sorted(ms for ok, ms in probes if ok)
        worst = f"{ok_ms[-1]:.1f} ms" if ok_ms else "-"
        print(f"  /healthz with {idle_clients} idle clients open: {len(ok_ms)}/20 answered, worst {worst}")
        http_threads = sum(t.name.startswith("http-") for t in threading.enumerate())
        added = threading.active_count() - threads_before
        print(f"  endpoint threads: {http_threads}; threads added by the storm and idle clients: {added:+d}")
    finally:
        for client in idle:
            client.close()
        endpoint.stop()


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def bench_daemon(machine: str, idle_s: float, settle_s: float) -> None:
    if not Path("/proc/self/stat").exists():
        print("daemon: not measured (needs Linux /proc)")
        return
    plugin_dir = Path(tempfile.mkdtemp(prefix="bench-dp-"))
    command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", machine, "--mig-strategy", "mixed"]
    command += ["--device-plugin-dir", str(plugin_dir), "--metrics-address", "127.0.0.1:0"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log_path = plugin_dir.with_suffix(".log")  # a file, not a pipe: a full pipe would stall the daemon
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log_file, env=env)
    try:
        time.sleep(settle_s)  # start-up (imports, first registration attempt) is not idle
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace").strip()[-400:]
            print(f"daemon: exited with {process.returncode} during start-up; not measured\n  {tail}")
            return
        hz = os.sysconf("SC_CLK_TCK")
        before = _cpu_ticks(process.pid)
        time.sleep(idle_s)
        cpu_s = (_cpu_ticks(process.pid) - before) / hz
        print(f"daemon [{machine}, metrics endpoint and health watcher on, no kubelet, {idle_s:.0f} s idle]:")
        rss_mib = _rss_kib(process.pid) / 1024
        print(f"  CPU {cpu_s:.3f} s = {100 * cpu_s / idle_s:.2f} % of one core   RSS {rss_mib:.1f} MiB")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(plugin_dir, ignore_errors=True)
        log_path.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--machine", default="island-16gpu")
    parser.add_argument("--scrapes", type=int, default=500)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--settle-s", type=float, default=3.0)
    parser.add_argument("--storm", type=int, default=1000)
    parser.add_argument("--idle-clients", type=int, default=500)
    args = parser.parse_args()
    bench_scrape(args.machine, args.scrapes)
    bench_storm(args.machine, args.storm, args.idle_clients)
    for machine in ("dgx1-v100", "island-16gpu", "h100-mig-mixed"):
        bench_daemon(machine, args.idle_s, args.settle_s)


if __name__ == "__main__":
    main()
