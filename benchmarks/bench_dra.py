"""The DRA driver's figures (prints them, never fails):

(a) NodePrepareResources p50/p99 for 1 and 8 claims per call, through the DRA kubelet stand-in (gRPC over a
    unix socket) with the claims read from the Kubernetes API stand-in by the real `kubernetes` client.
    Target: p99 < 50 ms.
(b) Fault to slice update: from a fault injected into the fake NVML (GPU lost) to the API stand-in holding a
    pool without that GPU. Target: p99 < 1 s.
(c) Listing order and attributes as a scheduling hint: a seeded trace of 1/2/4/8-GPU claims arriving and
    leaving, replayed through a model of Kubernetes' structured allocator (dra_first_fit.py: first fit in
    slice listing order, firstAvailable alternatives in order). For 2- and 4-GPU claims: the share that got a
    set optimal among the GPUs free at that moment (the allocator's score, criteria 1-4), and the claims left
    unplaced while enough GPUs were free by count, for: index order without constraint (how NVIDIA's driver
    lists), our listing order without constraint, `matchAttribute: <ownDomain>/bestSetK` (exact: refuses by
    design), and the `firstAvailable` claims deploy/dra/examples ships (rankedSetK A-D, one NUMA node, any).
    "missed" counts bestSetK claims refused although a whole group was free (must be 0). Target (issue 19),
    firstAvailable on dgx1-v100, pcie-8gpu-2socket, pcie-8gpu-2nic, hgx-h100: >= 98 % optimal, 0 unplaced.

Run: .venv/bin/python benchmarks/bench_dra.py [--rounds N] [--claims N] [--seed S]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import dra_first_fit as first_fit_model
from _common import percentile, table, target_line

from device_plugin.config.model import Config
from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.core.devices import Health
from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra.kube import api_client
from device_plugin.health.state import HealthTransition
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake import FakeNvml
from tests.dra.api_standin import ApiStandin
from tests.dra.kubelet_dra_standin import DraKubeletStandin

DRIVER, NODE = DEFAULT_DRA_DRIVER_NAME, "bench-node"
MACHINES = ("dgx1-v100", "pcie-8gpu-2socket", "hgx-h100", "island-16gpu")


# ---- (a) and (b): the running driver ----------------------------------------------------------------------


class Driver:
    """The node runtime with the DRA front-end, as `run --mode dra` builds it (no metrics endpoint)."""

    def __init__(self, root: Path, api: ApiStandin, fake: FakeNvml) -> None:
        config = Config()
        health = replace(config.daemon.health, quiet_period_s=0.2, probe_interval_s=0.05)
        daemon = replace(config.daemon, device_plugin_dir=root / "dp", health=health, metrics_address="")
        config = replace(config, daemon=daemon)
        self.front_end = DraFrontEnd.for_config(config, api_client(api.host), node_name=NODE)
        self.runtime = NodeRuntime(fake, config, self.front_end)
        self.runtime.start()
        self.front_end.publisher.wait_synced(30.0)

    def stop(self) -> None:
        self.runtime.stop()


def running_driver(root: Path, api: ApiStandin, fake: FakeNvml) -> Driver:
    return Driver(root, api, fake)


def prepare_samples(
    api: ApiStandin, kubelet: DraKubeletStandin, plugin: object, serial: Iterator[int], per_call: int, rounds: int
) -> tuple[list[float], int]:
    """NodePrepareResources round trips (ms) of `rounds` calls of `per_call` claims on gpu-0.., and the errors."""
    samples, errors = [], 0
    for _ in range(rounds):
        claims = []
        for k in range(per_call):
            n = next(serial)
            result = {"request": "gpus", "driver": DRIVER, "pool": NODE, "device": f"gpu-{k}"}
            api.claims[("ns", f"c{n}")] = {
                "metadata": {"namespace": "ns", "name": f"c{n}", "uid": f"u{n}"},
                "status": {"allocation": {"devices": {"results": [result]}}},
            }
            claims.append(("ns", f"u{n}", f"c{n}"))
        started = time.perf_counter()
        answers = kubelet.prepare(plugin, claims)  # type: ignore[arg-type]
        samples.append((time.perf_counter() - started) * 1000)
        errors += sum(1 for a in answers.values() if a.error)  # type: ignore[attr-defined]
        kubelet.unprepare(plugin, claims)  # type: ignore[arg-type]
    return samples, errors


def bench_prepare(rounds: int) -> list[list[str]]:
    rows = []
    root = Path(tempfile.mkdtemp(prefix="bdra-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    driver = running_driver(root, api, FakeNvml.from_machine("dgx1-v100"))
    kubelet = DraKubeletStandin(root / "plugins_registry")
    plugin = kubelet.wait_for_plugin()
    serial = itertools.count()
    try:
        for per_call in (1, 8):
            samples, errors = prepare_samples(api, kubelet, plugin, serial, per_call, rounds)
            p99 = percentile(samples, 99)
            verdict = "met" if p99 < 50 else "missed"
            rows.append(
                [str(per_call), f"{percentile(samples, 50):.1f}", f"{p99:.1f}", f"{verdict} (< 50 ms)", str(errors)]
            )
    finally:
        driver.stop()
        api.down()
        shutil.rmtree(root, ignore_errors=True)
    return rows


def bench_fault(rounds: int) -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="bdra-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    fake = FakeNvml.from_machine("dgx1-v100")
    driver = running_driver(root, api, fake)

    def names() -> set[str]:
        return {d["name"] for s in api.pool(DRIVER, NODE) for d in s["spec"]["devices"]}

    def wait(check: Callable[[], bool]) -> float:
        started = time.perf_counter()
        while not check() and time.perf_counter() - started < 10:
            time.sleep(0.001)
        return (time.perf_counter() - started) * 1000

    samples = []
    try:
        for i in range(rounds):
            gpu = i % 8
            name = f"gpu-{fake.device_minor(gpu)}"
            fake.faults.set_lost(gpu, "bench")
            samples.append(wait(lambda name=name: name not in names()))  # type: ignore[misc]
            fake.faults.recover(gpu)
            wait(lambda: len(names()) == 8)
    finally:
        driver.stop()
        api.down()
        shutil.rmtree(root, ignore_errors=True)
    p99 = percentile(samples, 99)
    return [f"{percentile(samples, 50):.0f}", f"{p99:.0f}", "met (< 1 s)" if p99 < 1000 else "missed (< 1 s)"]


# ---- (d): the runtime's cached inventory on island-16gpu --------------------------------------------------

ISLAND = "island-16gpu"


def transition(gpu: int, after: Health) -> HealthTransition:
    before = Health.HEALTHY if after is not Health.HEALTHY else Health.UNHEALTHY
    return HealthTransition(gpu, before, after, "bench", time.monotonic())


def verdict(value_ms: float, target_ms: float) -> str:
    return f"{'met' if value_ms < target_ms else 'missed'} (< {target_ms:g} ms)"


def bench_cached_inventory(rounds: int) -> list[list[str]]:
    root = Path(tempfile.mkdtemp(prefix="bdra-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    fake = FakeNvml.from_machine(ISLAND)
    driver = running_driver(root, api, fake)
    front_end, runtime = driver.front_end, driver.runtime
    kubelet = DraKubeletStandin(root / "plugins_registry")
    plugin = kubelet.wait_for_plugin()
    serial = itertools.count()
    rows = []

    def names() -> set[str]:
        return {d["name"] for s in api.pool(DRIVER, NODE) for d in s["spec"]["devices"]}

    def until(check: Callable[[], bool]) -> float:
        started = time.perf_counter()
        while not check() and time.perf_counter() - started < 10:
            time.sleep(0.0005)
        return (time.perf_counter() - started) * 1000

    try:
        # Health transition -> republished pool: the route's call returns at once, the publisher writes.
        samples, handled = [], []
        for i in range(rounds):
            gpu = 8 + i % 8  # away from the GPUs the prepare rounds below claim
            name = f"gpu-{fake.device_minor(gpu)}"
            started = time.perf_counter()
            front_end.on_health(transition(gpu, Health.UNHEALTHY))
            handled.append((time.perf_counter() - started) * 1000)
            samples.append(until(lambda name=name: name not in names()) + handled[-1])  # type: ignore[misc]
            front_end.on_health(transition(gpu, Health.HEALTHY))
            until(lambda: len(names()) == 16)
        p99 = percentile(samples, 99)
        rows.append(
            [
                "health transition -> republished slice",
                f"{percentile(samples, 50):.1f}",
                f"{p99:.1f}",
                verdict(p99, 100),
            ]
        )
        p99 = percentile(handled, 99)
        rows.append(
            [
                "  of which the health route's call",
                f"{percentile(handled, 50):.2f}",
                f"{p99:.2f}",
                "(the health watcher waits for it)",
            ]
        )
        # NodePrepareResources, quiet and with transitions arriving every 100 ms.
        quiet, _ = prepare_samples(api, kubelet, plugin, serial, 1, rounds)
        stop = threading.Event()

        def flap() -> None:
            k = 0
            while not stop.wait(0.1):
                gpu = 8 + (k // 2) % 8
                front_end.on_health(transition(gpu, Health.UNHEALTHY if k % 2 == 0 else Health.HEALTHY))
                k += 1

        flapper = threading.Thread(target=flap, daemon=True)
        flapper.start()
        try:
            busy, _ = prepare_samples(api, kubelet, plugin, serial, 1, rounds)
        finally:
            stop.set()
            flapper.join()
        for label, values in (("quiet", quiet), ("health transitions every 100 ms", busy)):
            p99 = percentile(values, 99)
            row = [f"NodePrepareResources, {label}", f"{percentile(values, 50):.1f}", f"{p99:.1f}", verdict(p99, 20)]
            rows.append(row)
        # A rescan that finds the same GPUs, MIG layouts and Topology: compare, publish nothing.
        front_end.publisher.wait_synced(10.0)
        generation, rescans = front_end.publisher.generation, []
        for _ in range(max(10, rounds // 4)):
            started = time.perf_counter()
            runtime.rebuild()
            rescans.append((time.perf_counter() - started) * 1000)
        republished = front_end.publisher.generation != generation
        p99 = percentile(rescans, 99)
        note = " REPUBLISHED" if republished else ""
        rows.append(["no-change rescan", f"{percentile(rescans, 50):.1f}", f"{p99:.1f}", verdict(p99, 50) + note])
    finally:
        driver.stop()
        api.down()
        shutil.rmtree(root, ignore_errors=True)
    return rows


# ---- (c): the first-fit allocator model (dra_first_fit.py) -----------------------------------------------

PLACEMENT_MACHINES = ("dgx1-v100", "pcie-8gpu-2socket", "pcie-8gpu-2nic", "hgx-h100", "island-16gpu")
TARGET_MACHINES = PLACEMENT_MACHINES[:4]  # issue 19's: >= 98 % optimal, 0 unplaced while enough are free


def bench_listing(seed: int, claims: int) -> tuple[list[list[str]], list[str]]:
    events = first_fit_model.trace(seed, claims)
    alternatives = first_fit_model.shipped_alternatives()
    rows, verdicts = [], []
    for machine in PLACEMENT_MACHINES:
        for scenario in ("index", "ours", "bestSetK", "firstAvailable"):
            stats, unplaced, missed = first_fit_model.replay(machine, scenario, events, alternatives, OWN_DOMAIN)
            shares = [f"{100 * o / p:.0f}% of {p}" if p else "-" for o, p in (stats[2], stats[4])]
            rows.append([machine, scenario, *shares, str(unplaced), str(missed)])
            if scenario == "firstAvailable" and machine in TARGET_MACHINES:
                worst = min(100 * o / p for o, p in (stats[2], stats[4]) if p)
                met = worst >= 98 and unplaced == 0
                what = f"{machine}, shipped firstAvailable claims: >= 98 % optimal (worst {worst:.0f} %)"
                verdicts.append(target_line(f"{what}, 0 unplaced while enough free ({unplaced})", met))
    return rows, verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="prepare calls per size, faults")
    parser.add_argument("--claims", type=int, default=300, help="claims in the trace")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--parts", default="abcd", help="which parts to run, e.g. d (default abcd)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if "a" in args.parts:
        print("(a) NodePrepareResources (dgx1-v100, claims read through the API stand-in)")
        print(table(["claims/call", "p50 ms", "p99 ms", "target", "claim errors"], bench_prepare(args.rounds)))
    if "b" in args.parts:
        print(f"\n(b) fault to slice update ({max(10, args.rounds // 10)} faults, dgx1-v100)")
        print(table(["p50 ms", "p99 ms", "target"], [bench_fault(max(10, args.rounds // 10))]))
    if "c" in args.parts:
        trace = f"trace seed {args.seed}, {args.claims} claims (sizes 1/2/4/8: 40/30/20/10%)"
        print(f"\n(c) first-fit allocator model, {trace}; claims of 2 and 4 GPUs as deploy/dra/examples ships them")
        headers = ["machine", "listing/claim", "2-GPU optimal among free", "4-GPU optimal among free"]
        headers += ["unplaced (enough free)", "missed (free bestSet group)"]
        rows, verdicts = bench_listing(args.seed, args.claims)
        print(table(headers, rows))
        print("\n".join(verdicts))
    if "d" in args.parts:
        print(f"\n(d) the runtime in mode dra on {ISLAND} ({args.rounds} rounds each, stand-ins, no cluster)")
        print(table(["what", "p50 ms", "p99 ms", "target"], bench_cached_inventory(args.rounds)))


if __name__ == "__main__":
    main()
