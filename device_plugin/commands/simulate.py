"""`gpu-device-plugin simulate`: replay a workload on a machine under our policy and two baselines.

Without --trace a seeded workload is generated (sizes 1, 2, 4, 8 mixed). The trace format is
documented in device_plugin.gpu_sets.simulation and docs/allocation.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from device_plugin.commands._machine import add_machine_argument, build_allocator, fail
from device_plugin.core.errors import ConfigError, PluginError
from device_plugin.gpu_sets.simulation import (
    SimulationResult,
    generate_workload,
    parse_trace,
    policies,
    replay,
)

NIC_SIZES = (4, 8)  # the pods that go multi-node, whose GPUs all want a GPUDirect-close NIC
NAME = "simulate"
HELP = "replay pods arriving and leaving (seeded, or --trace FILE) and compare allocation quality"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_machine_argument(parser)
    parser.add_argument(
        "--trace",
        type=Path,
        help="trace file: '<time_s> start <pod> <gpus>' / '<time_s> stop <pod>'",
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="workload and kubelet-order seed (default 1)"
    )
    parser.add_argument(
        "--pods", type=int, default=300, help="pods in a generated workload (default 300)"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def summary(result: SimulationResult) -> dict[str, object]:
    return {
        "placed": len(result.placements),
        "unplaced": result.unplaced,
        "mean_ring_gbps_by_size": {
            str(s): round(result.mean_ring_gbps(s), 2) for s in result.sizes() if s >= 2
        },
        "optimal_share_multi_gpu": round(result.optimal_share(), 4),
        "hurt_by_fragmentation": result.hurt_by_fragmentation(),
        "all_gpus_nic_close_share_by_size": {
            str(s): round(share, 4)
            for s in NIC_SIZES
            if (share := result.all_nic_close_share(s)) is not None
        },
    }


def run(args: argparse.Namespace) -> int:
    try:
        allocator = build_allocator(args.machine)
        if args.trace is not None:
            try:
                lines = args.trace.read_text(encoding="utf-8").splitlines()
            except OSError as error:
                raise ConfigError(
                    "--trace", f"cannot read {args.trace.absolute()}: {error.strerror}"
                ) from None
            events = parse_trace(lines, source=str(args.trace))
        else:
            events = generate_workload(allocator.topology.gpu_count, seed=args.seed, pods=args.pods)
    except PluginError as error:
        return fail(error)
    results = {
        name: replay(allocator, events, policy, args.seed)
        for name, policy in policies(allocator).items()
    }
    if args.json:
        print(json.dumps({name: summary(r) for name, r in results.items()}, indent=2))
        return 0
    for name, r in results.items():
        rings = (
            ", ".join(f"{s} GPUs {r.mean_ring_gbps(s):.2f}" for s in r.sizes() if s >= 2)
            or "no multi-GPU pods"
        )
        print(f"{name}:")
        print(f"  placed {len(r.placements)}, unplaced (not enough free GPUs) {r.unplaced}")
        print(f"  mean predicted ring bandwidth: {rings} (GB/s)")
        print(f"  multi-GPU pods optimal among the free GPUs: {100 * r.optimal_share():.1f}%")
        print(
            "  multi-GPU pods below the empty-node best (fragmentation): "
            f"{r.hurt_by_fragmentation()}"
        )
        if allocator.topology.nic_count:
            shares = [(s, r.all_nic_close_share(s)) for s in NIC_SIZES]
            text = (
                ", ".join(
                    f"{s} GPUs {100 * share:.1f}%" for s, share in shares if share is not None
                )
                or "none"
            )
            print(f"  pods with a GPUDirect-close NIC on every GPU: {text}")
    return 0
