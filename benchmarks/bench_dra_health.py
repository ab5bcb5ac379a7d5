"""Health transition to device taint written, and to the kubelet's health stream (prints figures, never fails).

The running DRA driver (node runtime + DRA front-end on fake NVML, as `run --mode dra` builds it) publishes to
the API-server stand-in (testbed/api_standin.py, real `kubernetes` client over HTTP) and registers with the
DRA kubelet stand-in, which keeps a DRAResourceHealth stream open (gRPC over the unix socket). Each round
injects an Xid 79 on one GPU (rotating), then recovers it. Measured, from the transition reaching the
front-end (the runtime's one health delivery calls DraFrontEnd.on_health; timed at that call):
- to the API stand-in holding the taint on that GPU's device (`taint written`), and back: to the taint gone
  after the recovery transition (`taint removed`);
- where the API server keeps no taints (DRADeviceTaints off): to the device gone from the pool, and back;
- to the kubelet stand-in's stream showing the device Unhealthy (`health stream`).
Also the end to end from the fault injected into fake NVML to the taint written (the watcher's event thread
included). Target (issue 19): transition -> taint written p99 < 100 ms.

Every wait has a timeout (--timeout, a round past it counts as lost) and the run a deadline (--deadline).

Run: .venv/bin/python benchmarks/bench_dra_health.py [--rounds N] [--timeout S] [--deadline S]
"""

from __future__ import annotations

import argparse
import logging
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from _common import percentile, table, target_line

from device_plugin.config.model import Config
from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.health.state import HealthTransition
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from device_plugin.process.gc_pauses import freeze_start_up_objects
from device_plugin.standins.kubelet_dra import DraKubeletStandin, HealthWatch
from testbed.api_standin import ApiStandin
from testbed.scheduler_view import newest_devices, taints_of

DRIVER, NODE = DEFAULT_DRA_DRIVER_NAME, "bench-node"
TARGET_MS = 100.0
UNHEALTHY = 2


class Run:
    """One driver against one API stand-in; `delivered[gpu]` is when on_health last saw that GPU change."""

    def __init__(self, root: Path, api: ApiStandin, fake: FakeNvml) -> None:
        config = Config()
        health = replace(config.daemon.health, quiet_period_s=0.1, probe_interval_s=0.02, event_wait_s=0.05)
        daemon = replace(config.daemon, device_plugin_dir=root / "dp", health=health, metrics_address="")
        config = replace(config, daemon=daemon)
        self.front_end = DraFrontEnd.for_config(config, api_client(api.host), node_name=NODE)
        self.delivered: dict[int, float] = {}
        route = self.front_end.on_health

        def timed(transition: HealthTransition) -> tuple[str, ...]:
            self.delivered[transition.gpu_index] = time.perf_counter()
            return route(transition)

        self.front_end.on_health = timed  # type: ignore[method-assign]  # the runtime's route, timed
        self.runtime = NodeRuntime(fake, config, self.front_end)
        self.runtime.start()

    def stop(self) -> None:
        self.runtime.stop()


def _until(check: Callable[[], bool], timeout_s: float) -> float | None:
    """perf_counter() once `check` holds, or None after `timeout_s`."""
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if check():
            return time.perf_counter()
        time.sleep(0.0005)
    return None


class StreamClock:
    """Reads the kubelet stand-in's health stream on a thread of its own: when each device was first seen
    Unhealthy (perf_counter at arrival), so the figure does not wait behind the slice's."""

    def __init__(self, watch: HealthWatch) -> None:
        self._watch = watch
        self.unhealthy_since: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="stream-clock", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                response = self._watch.next(0.2)
            except queue.Empty:
                continue
            if response is None:
                return
            now = time.perf_counter()
            for d in response.devices:  # type: ignore[attr-defined]
                name = d.device.device_name
                if d.health == UNHEALTHY:
                    self.unhealthy_since.setdefault(name, now)
                else:
                    self.unhealthy_since.pop(name, None)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


def bench(
    keeps_taints: bool, rounds: int, timeout_s: float, deadline: float, schema_check: bool
) -> dict[str, list[float] | int]:
    root = Path(tempfile.mkdtemp(prefix="bdrh-", dir="/tmp"))
    api = ApiStandin().up()
    api.keeps_taints = keeps_taints
    api.schema_check = schema_check  # as bench_dra (d): a real API server validates out of our process
    api.add_node(NODE)
    fake = FakeNvml.from_machine("dgx1-v100")
    run = Run(root, api, fake)
    kubelet = DraKubeletStandin(root / "plugins_registry")
    watch: HealthWatch | None = None
    clock: StreamClock | None = None
    out: dict[str, list[float] | int] = {"written": [], "removed": [], "stream": [], "fault": [], "lost": 0}
    try:
        watch = kubelet.watch_health(kubelet.wait_for_plugin(timeout_s))
        freeze_start_up_objects()  # as `run` does once it serves
        clock = StreamClock(watch)
        if not run.front_end.publisher.wait_synced(timeout_s):
            out["lost"] = rounds
            return out

        def marked(name: str) -> bool:
            pool = api.pool(DRIVER, NODE)
            if keeps_taints:
                return name in taints_of(pool)
            return name not in {d["name"] for d in newest_devices(pool)}

        for i in range(rounds):
            if time.monotonic() > deadline:
                break
            gpu = i % 8
            name = f"gpu-{fake.device_minor(gpu)}"
            run.delivered.pop(gpu, None)
            injected = time.perf_counter()
            fake.test_hooks.inject(HealthEvent(gpu, HealthEventKind.XID, xid=79))
            written = _until(lambda name=name: marked(name), timeout_s)  # type: ignore[misc]
            _until(lambda name=name: name in clock.unhealthy_since, timeout_s)  # type: ignore[misc,union-attr]
            streamed = clock.unhealthy_since.get(name)
            delivered = run.delivered.get(gpu)
            if written is None or delivered is None:
                out["lost"] += 1  # type: ignore[operator]
            else:
                out["written"].append((written - delivered) * 1000)  # type: ignore[union-attr]
                out["fault"].append((written - injected) * 1000)  # type: ignore[union-attr]
                if streamed is not None:
                    out["stream"].append(max(0.0, streamed - delivered) * 1000)  # type: ignore[union-attr]
            run.delivered.pop(gpu, None)
            fake.test_hooks.recover(gpu)
            gone = _until(lambda g=gpu, n=name: not marked(n) and run.delivered.get(g) is not None, timeout_s)  # type: ignore[misc]
            back = run.delivered.get(gpu)
            if gone is None or back is None:
                out["lost"] += 1  # type: ignore[operator]
            else:
                out["removed"].append((gone - back) * 1000)  # type: ignore[union-attr]
    finally:
        if clock is not None:
            clock.stop()
        if watch is not None:
            watch.close()
        run.stop()
        api.down()
        shutil.rmtree(root, ignore_errors=True)
    return out


def _row(label: str, samples: list[float], target: bool) -> list[str]:
    if not samples:
        return [label, "0", "-", "-", "-", "no samples"]
    p99 = percentile(samples, 99)
    verdict = target_line(f"p99 < {TARGET_MS:g} ms", p99 < TARGET_MS) if target else ""
    return [label, str(len(samples)), f"{percentile(samples, 50):.1f}", f"{p99:.1f}", f"{max(samples):.1f}", verdict]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="fault-and-recovery rounds per server kind")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds a round may wait before it is lost")
    parser.add_argument("--deadline", type=float, default=240.0, help="seconds for the whole run")
    parser.add_argument(
        "--schema-check",
        action="store_true",
        help="the API stand-in checks every write against the schema (~20 ms of Python a slice write, in this "
        "process, timed as ours); off by default, as in bench_dra.py (d)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    deadline = time.monotonic() + args.deadline
    print(f"health transition -> taint written (dgx1-v100, Xid 79 then recovery, {args.rounds} rounds per server)")
    print(f"    the API stand-in's schema check of each write {'on' if args.schema_check else 'off (--schema-check)'}")
    rows = []
    for keeps, kind in ((True, "taints kept"), (False, "taints not kept")):
        got = bench(keeps, args.rounds, args.timeout, deadline, args.schema_check)
        mark = "taint written" if keeps else "device left the pool"
        back = "taint removed" if keeps else "device back in the pool"
        rows.append(_row(f"{kind}: transition -> {mark}", got["written"], True))  # type: ignore[arg-type]
        rows.append(_row(f"{kind}: recovery -> {back}", got["removed"], True))  # type: ignore[arg-type]
        rows.append(_row(f"{kind}: transition -> health stream", got["stream"], False))  # type: ignore[arg-type]
        rows.append(_row(f"{kind}: fault in NVML -> {mark}", got["fault"], False))  # type: ignore[arg-type]
        if got["lost"]:
            rows.append([f"{kind}: rounds lost (past --timeout)", str(got["lost"]), "-", "-", "-", ""])
    print(table(["what", "n", "p50 ms", "p99 ms", "max ms", "result"], rows))
    if time.monotonic() > deadline:
        print(f"(stopped at the {args.deadline:g} s deadline: later cases ran fewer rounds)")


if __name__ == "__main__":
    main()
