"""`gpu-device-plugin allocate`: what GetPreferredAllocation would answer, optionally with the
reasons.

The answer comes from the resource the daemon would serve (commands._compose: same config, same
composition), through its own ResourceManager.preferred_allocation: GPUs the daemon does not serve
as the resource (a MIG-enabled GPU is never nvidia.com/gpu) are never offered, and with time-slicing
or MIG the chosen devices are replicas or MIG devices. --explain shows the allocator's reasons for
whole-GPU resources.
"""

from __future__ import annotations

import argparse
import json

from device_plugin.commands._compose import Composed, add_config_arguments, composed_node
from device_plugin.commands._machine import add_machine_argument, fail, parse_indices
from device_plugin.core.devices import Device
from device_plugin.core.errors import InvalidRequestError, PluginError
from device_plugin.core.names import GPU_RESOURCE
from device_plugin.core.short_text import counted
from device_plugin.gpu_sets.decision import Candidate, Explanation

NAME = "allocate"
HELP = "choose GPUs for a request as GetPreferredAllocation would (--explain: why these)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_machine_argument(parser)
    add_config_arguments(parser)
    parser.add_argument(
        "--resource",
        default=GPU_RESOURCE,
        help=f"the resource asked for (default {GPU_RESOURCE}), e.g. nvidia.com/mig-1g.10gb",
    )
    parser.add_argument(
        "--size", type=int, required=True, help="how many devices the container asks for (required)"
    )
    parser.add_argument(
        "--available", help="GPU indices whose devices are free, comma-separated (default: all)"
    )
    parser.add_argument(
        "--must-include",
        help="GPU indices the answer must contain, comma-separated (default: none)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output (key `gpus`)")
    parser.add_argument(
        "--explain", action="store_true", help="show scores, the runner-up and why it lost"
    )


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
        out["left_free_best_ring_gbps"] = {
            str(s): g for s, g in candidate.fragmentation.best_ring_gbps
        }
        out["left_free_partner_sum_gbps"] = candidate.fragmentation.partner_sum_gbps
    return out


def _text(explanation: Explanation, explain: bool) -> str:
    d = explanation.decision
    lines = [
        f"GPUs: {','.join(map(str, d.chosen))}",
        f"predicted ring bandwidth: {d.ring_bandwidth_gbps:g} GB/s "
        f"(best for {counted(d.size, 'GPU')} on an empty node: {d.best_possible_gbps:g} GB/s)",
    ]
    if explain:
        c = explanation.chosen
        lines.append(
            f"chosen scores: total pairwise {c.score.total_gbps:g} GB/s, {c.score.numa_nodes} NUMA "
            "node(s), "
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
            lines.append(
                f"runner-up: {','.join(map(str, r.gpus))} (ring {r.score.ring_gbps:g} GB/s)"
            )
            lines.append(f"why it lost: {explanation.reason}")
        lines.append("search: " + ("exact" if d.exact else "bounded (more than 16 GPUs)"))
    return "\n".join(lines)


def _gpus(indices: list[int] | set[int]) -> str:
    ordered = sorted(indices)
    return f"GPU{'s' if len(ordered) > 1 else ''} {', '.join(map(str, ordered))}"


def _served(composed: Composed, name: str) -> tuple[Device, ...]:
    resource = composed.resource(name)
    if resource is None:
        why = composed.not_served_whole() if name == GPU_RESOURCE else ""
        raise InvalidRequestError(
            f"{name} is not served on this node with migStrategy "
            f"{composed.config.flags.mig_strategy} "
            f"(served: {composed.served()}){f'; {why}' if why else ''}"
        )
    return resource.snapshot().devices


def _device_ids(
    composed: Composed, name: str, available: list[int] | None, must: list[int]
) -> tuple[list[str], list[str]]:
    """The resource's device IDs on the `available` GPUs, and on the `must` GPUs (whole GPUs
    only)."""
    devices = _served(composed, name)
    served = {d.gpu_indices[0] for d in devices}
    wanted = set(served if available is None else available)
    outside = sorted((wanted | set(must)) - served)
    if outside:
        why = composed.not_served_whole() if name == GPU_RESOURCE else ""
        raise InvalidRequestError(
            f"--available/--must-include: {_gpus(outside)} {'is' if len(outside) == 1 else 'are'} "
            "not served as "
            f"{name} (it is served on {_gpus(served)}){f'; {why}' if why else ''}"
        )
    resource = composed.resource(name)
    assert resource is not None
    if must and not composed.whole_gpus(resource):
        raise InvalidRequestError(
            f"--must-include names whole GPUs; {name} devices are replicas or MIG devices"
        )
    if not set(must) <= wanted:
        raise InvalidRequestError(
            f"--must-include: {_gpus(set(must) - wanted)} not in --available {_gpus(wanted)}"
        )
    return [d.id for d in devices if d.gpu_indices[0] in wanted], [
        d.id for d in devices if d.gpu_indices[0] in must
    ]


def _check_size(
    size: int, name: str, ids: list[str], must_ids: list[str], available: list[int] | None
) -> None:
    """The request in the flags' terms (the allocator's own checks name the kubelet's wire
    fields)."""
    if size <= 0:
        raise InvalidRequestError(f"--size must be at least 1, got {size}")
    if size > len(ids):
        among = "on the --available GPUs" if available is not None else "on this node"
        raise InvalidRequestError(f"--size {size} exceeds the {len(ids)} {name} devices {among}")
    if len(must_ids) > size:
        raise InvalidRequestError(
            f"--must-include holds {len(must_ids)} devices, more than --size {size}"
        )


def run(args: argparse.Namespace) -> int:
    try:
        available = parse_indices(args.available, "--available")
        must = parse_indices(args.must_include, "--must-include") or []
        with composed_node(args) as composed:
            ids, must_ids = _device_ids(composed, args.resource, available, must)
            _check_size(args.size, args.resource, ids, must_ids, available)
            resource = composed.resource(args.resource)
            assert resource is not None
            chosen = resource.preferred_allocation(ids, must_ids, args.size)
            by_id = {d.id: d for d in resource.snapshot().devices}
            gpus = sorted({by_id[i].gpu_indices[0] for i in chosen})
            explanation = None
            if composed.whole_gpus(resource) and composed.node.allocator is not None:
                explanation = composed.node.allocator.explain(
                    sorted({by_id[i].gpu_indices[0] for i in ids}), must, args.size
                )
    except PluginError as error:
        return fail(error)
    if explanation is None:
        return _print_devices(args, chosen, gpus, by_id)
    d = explanation.decision
    if args.json:
        out: dict[str, object] = {
            "resource": args.resource,
            "devices": list(chosen),
            "gpus": list(d.chosen),
            "ring_bandwidth_gbps": d.ring_bandwidth_gbps,
            "best_possible_gbps": d.best_possible_gbps,
            "optimal": d.optimal,
            "exact": d.exact,
        }
        if args.explain:
            out["chosen"] = _candidate(explanation.chosen)
            out["runner_up"] = (
                None if explanation.runner_up is None else _candidate(explanation.runner_up)
            )
            out["reason"] = explanation.reason
        print(json.dumps(out, indent=2))
    else:
        print(_text(explanation, args.explain))
    return 0


def _print_devices(
    args: argparse.Namespace, chosen: tuple[str, ...], gpus: list[int], by_id: dict[str, Device]
) -> int:
    """A replica or MIG resource: the devices chosen and their GPUs (the allocator explains whole
    GPUs only)."""
    if args.json:
        print(
            json.dumps({"resource": args.resource, "devices": list(chosen), "gpus": gpus}, indent=2)
        )
        return 0
    print(f"{args.resource}: {', '.join(f'{i} (GPU {by_id[i].gpu_indices[0]})' for i in chosen)}")
    print(f"GPUs: {','.join(map(str, gpus))}")
    if args.explain:
        print("(--explain shows the allocator's reasons for whole-GPU resources only)")
    return 0
