"""`gpu-device-plugin allocate`: what GetPreferredAllocation would answer, optionally with the reasons."""

from __future__ import annotations

import argparse
import json

from device_plugin.allocator.decision import Candidate, Explanation
from device_plugin.commands._machine import add_machine_argument, build_allocator, fail, parse_indices
from device_plugin.errors import PluginError

NAME = "allocate"
HELP = "choose GPUs for a request as GetPreferredAllocation would (--explain: why these)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_machine_argument(parser)
    parser.add_argument("--size", type=int, required=True, help="how many GPUs the container asks for")
    parser.add_argument("--available", help="free GPU indices, comma-separated (default: all)")
    parser.add_argument("--must-include", help="GPU indices the answer must contain, comma-separated")
    parser.add_argument("--json", action="store_true", help="machine-readable output (key `gpus`)")
    parser.add_argument("--explain", action="store_true", help="show scores, the runner-up and why it lost")


def _candidate(candidate: Candidate) -> dict[str, object]:
    out: dict[str, object] = {
        "gpus": list(candidate.gpus),
        "ring_bandwidth_gbps": candidate.score.ring_gbps,
        "total_pairwise_gbps": candidate.score.total_gbps,
        "numa_nodes": candidate.score.numa_nodes,
        "gpus_with_close_nic": candidate.score.close_nic_gpus,
        "gpus_on_distinct_close_nics": candidate.score.distinct_close_nics,
    }
    if candidate.fragmentation is not None:
        out["left_free_best_ring_gbps"] = {str(s): g for s, g in candidate.fragmentation.best_ring_gbps}
        out["left_free_partner_sum_gbps"] = candidate.fragmentation.partner_sum_gbps
    return out


def _text(explanation: Explanation, explain: bool) -> str:
    d = explanation.decision
    lines = [
        f"GPUs: {','.join(map(str, d.chosen))}",
        f"predicted ring bandwidth: {d.ring_bandwidth_gbps:g} GB/s "
        f"(best for {d.size} GPUs on an empty node: {d.best_possible_gbps:g} GB/s)",
    ]
    if explain:
        c = explanation.chosen
        lines.append(
            f"chosen scores: total pairwise {c.score.total_gbps:g} GB/s, {c.score.numa_nodes} NUMA node(s), "
            f"{c.score.close_nic_gpus} GPU(s) with a GPUDirect-close NIC "
            f"({c.score.distinct_close_nics} on distinct NICs)"
            + (
                ", leaves free best rings "
                + ", ".join(f"{s} GPUs {g:g}" for s, g in c.fragmentation.best_ring_gbps)
                + f", partner sum {c.fragmentation.partner_sum_gbps:g} GB/s"
                if c.fragmentation
                else ""
            )
        )
        if explanation.runner_up is None:
            lines.append(f"runner-up: none ({explanation.reason})")
        else:
            r = explanation.runner_up
            lines.append(f"runner-up: {','.join(map(str, r.gpus))} (ring {r.score.ring_gbps:g} GB/s)")
            lines.append(f"why it lost: {explanation.reason}")
        lines.append("search: " + ("exact" if d.exact else "bounded (more than 16 GPUs)"))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        available = parse_indices(args.available, "--available")
        must = parse_indices(args.must_include, "--must-include") or []
        allocator = build_allocator(args.machine)
        if available is None:
            available = list(range(allocator.topology.gpu_count))
        explanation = allocator.explain(available, must, args.size)
    except PluginError as error:
        return fail(error)
    d = explanation.decision
    if args.json:
        out: dict[str, object] = {
            "gpus": list(d.chosen),
            "ring_bandwidth_gbps": d.ring_bandwidth_gbps,
            "best_possible_gbps": d.best_possible_gbps,
            "optimal": d.optimal,
            "exact": d.exact,
        }
        if args.explain:
            out["chosen"] = _candidate(explanation.chosen)
            out["runner_up"] = None if explanation.runner_up is None else _candidate(explanation.runner_up)
            out["reason"] = explanation.reason
        print(json.dumps(out, indent=2))
    else:
        print(_text(explanation, args.explain))
    return 0
