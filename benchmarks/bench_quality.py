"""Allocation quality on a seeded workload, per shipped machine, under three policies. Prints figures.

Usage: .venv/bin/python benchmarks/bench_quality.py [--seeds 1,2,3] [--pods 300]

Policies: ours (device_plugin.gpu_sets), first-fit in the kubelet's random order, and our own
reimplementation of NVIDIA's pairwise-score partition policy (device_plugin.gpu_sets.baselines).
Per policy: mean predicted ring bandwidth per pod size (GB/s), the share of multi-GPU pods that got
an optimal ring among the GPUs free at that moment, and the multi-GPU pods whose ring fell below what
an empty node gives (fragmentation). Summed over the seeds. The last column checks the claim: ours at
least as good as every baseline on every figure.
"""

from __future__ import annotations

import argparse

import _common  # noqa: F401  (puts the checkout on sys.path)
from _common import table

from device_plugin.gpu_sets import Allocator
from device_plugin.gpu_sets.simulation import Placement, SimulationResult, generate_workload, policies, replay
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated workload seeds")
    parser.add_argument("--pods", type=int, default=300, help="pods per workload")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    rows, verdicts = [], []
    for machine in shipped_machine_names():
        allocator = Allocator(build_topology(FakeNvml.from_machine(machine)))
        n = allocator.topology.gpu_count
        merged: dict[str, list[Placement]] = {}
        for seed in seeds:
            events = generate_workload(n, seed=seed, pods=args.pods)
            for name, policy in policies(allocator).items():
                merged.setdefault(name, []).extend(replay(allocator, events, policy, seed).placements)
        results = {name: SimulationResult(tuple(p), 0) for name, p in merged.items()}
        ours_name = next(iter(results))
        ours = results[ours_name]
        for name, result in results.items():
            rings = " ".join(f"{s}:{result.mean_ring_gbps(s):.1f}" for s in result.sizes() if s >= 2) or "-"
            rows.append(
                [
                    machine,
                    name,
                    rings,
                    f"{100 * result.optimal_share():.1f}%",
                    str(result.hurt_by_fragmentation()),
                ]
            )
        baselines = [r for name, r in results.items() if name != ours_name]
        at_least = all(
            all(ours.mean_ring_gbps(s) >= b.mean_ring_gbps(s) - 1e-9 for s in ours.sizes())
            and ours.optimal_share() >= b.optimal_share()
            and ours.hurt_by_fragmentation() <= b.hurt_by_fragmentation()
            for b in baselines
        )
        strictly = all(
            ours.hurt_by_fragmentation() < b.hurt_by_fragmentation()
            or any(ours.mean_ring_gbps(s) > b.mean_ring_gbps(s) + 1e-9 for s in ours.sizes())
            for b in baselines
        )
        verdicts.append([machine, str(n), "yes" if at_least else "NO", "yes" if strictly else "no (equal)"])
    print(f"Seeds {seeds}, {args.pods} pods each; sizes 1/2/4/8 weighted 40/30/20/10 %, about 75 % load")
    print(table(["machine", "policy", "mean ring GB/s by size", "optimal among free", "hurt by fragmentation"], rows))
    print()
    print(table(["machine", "GPUs", "ours >= every baseline", "ours strictly better than each"], verdicts))


if __name__ == "__main__":
    main()
