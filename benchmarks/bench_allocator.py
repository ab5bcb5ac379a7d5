"""Allocator latency (p50/p99 per machine and size) and start-up precompute time. Prints figures only.

Usage: .venv/bin/python benchmarks/bench_allocator.py [--requests N] [--seed S]

Requests are drawn at random per size: an available set of random size >= the request (a quarter of
them the whole node, as on an idle node), and must_include of 0-2 GPUs of it in a third of them. The
call timed is Allocator.allocate (validation included), i.e. what GetPreferredAllocation costs minus
gRPC. Each request is timed --repeat times and its fastest run kept, which filters out the
other processes of a shared machine (the single-run p99 is printed too).
Machines: every shipped machine with at least 8 GPUs, plus a synthetic 24-GPU machine (three
NVSwitch islands) for the bounded search.
"""

from __future__ import annotations

import argparse
import random
import time

import _common  # noqa: F401  (puts the checkout on sys.path)
from _common import percentile, table

from device_plugin.gpu_sets import Allocator
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.description import parse_machine_description
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from device_plugin.topology.model import Topology


def islands(count: int, per_island: int) -> Topology:
    gpus = [
        {
            "model": "NVIDIA H100 80GB HBM3",
            "memory_mib": 81559,
            "numa_node": i // per_island,
            "pcie": [f"cpu{i // per_island}", f"cpu{i // per_island}-rp{i % per_island // 2}"],
        }
        for i in range(count * per_island)
    ]
    domains = [{"gpus": list(range(d * per_island, (d + 1) * per_island)), "links_per_gpu": 18} for d in range(count)]
    description = parse_machine_description({"name": "islands-24", "gpus": gpus, "nvswitch": domains})
    return build_topology(FakeNvml(description))


def machines() -> dict[str, Topology]:
    out = {}
    for name in shipped_machine_names():
        topology = build_topology(FakeNvml.from_machine(name))
        if topology.gpu_count >= 8:
            out[name] = topology
    out["synthetic-24gpu (bounded)"] = islands(3, 8)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per machine and size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="timings per request; the fastest is kept")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    start_rows, latency_rows = [], []
    for name, topology in machines().items():
        began = time.perf_counter()
        allocator = Allocator(topology)
        start_rows.append([name, str(topology.gpu_count), f"{(time.perf_counter() - began) * 1000:.0f} ms"])
        n = topology.gpu_count
        for size in sorted({1, 2, 3, 4, 5, 8, n // 2, n} - {0}):
            samples, first_runs = [], []
            for i in range(args.requests):
                count = n if i % 4 == 0 else rng.randint(size, n)
                available = rng.sample(range(n), count)
                must = rng.sample(available, min(size, rng.randint(0, 2))) if i % 3 == 0 else []
                runs = []
                for _ in range(args.repeat):
                    began = time.perf_counter()
                    allocator.allocate(available, must, size)
                    runs.append((time.perf_counter() - began) * 1e6)
                samples.append(min(runs))
                first_runs.append(runs[0])
            latency_rows.append(
                [
                    name,
                    str(size),
                    f"{percentile(samples, 50):.0f}",
                    f"{percentile(samples, 99):.0f}",
                    f"{max(samples):.0f}",
                    f"{percentile(first_runs, 99):.0f}",
                ]
            )
    print("Start-up precompute (Allocator construction)")
    print(table(["machine", "GPUs", "time"], start_rows))
    print()
    print(f"Allocator call latency, {args.requests} random requests per row, best of {args.repeat} (microseconds)")
    print(table(["machine", "size", "p50 us", "p99 us", "max us", "single-run p99 us"], latency_rows))


if __name__ == "__main__":
    main()
