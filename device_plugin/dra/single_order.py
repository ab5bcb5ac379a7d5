"""The order in which single-GPU claims should take a node's whole GPUs, published as
`<ownDomain>/singleGPURank`.

Boundary: pure, over an Allocator; no NVML, no Kubernetes objects (inventory.py publishes the
ranks).

Why: Kubernetes' allocator gives a one-GPU claim the first free GPU in slice order, and the slices
list the best multi-GPU sets first (partitions.py), so single GPUs went to the GPUDirect-close,
best-connected GPUs that the allocator keeps for multi-GPU pods (on pcie-8gpu-2nic 1 of 10
single-GPU allocations was the allocator's choice). A claim that tries `singleGPURank == 0`, then 1,
2, ... takes the free GPU ranked first.

How: one static order cannot always be the allocator's choice, which depends on what is free
(criterion 5: it takes the GPU whose loss hurts the rest least, e.g. one whose NVLink partner is
busy). On nodes of up to COVERING_MAX_GPUS GPUs every set of free GPUs (a "situation") is looked at:
each rank in turn goes to the GPU that is an optimal choice (criteria 4 and 5, as the allocator
scores them) in the most situations not yet decided by a lower rank, less those where it is not.
Larger nodes get the allocator's successive choices on the empty node. Either way every GPU without
a GPUDirect-close NIC ranks before every NIC-close one where the node has NICs (criterion 4 decides
before fragmentation).

That static order is what the inventory publishes; once claims hold GPUs the driver republishes the
ranks (dra/occupancy.py) by `occupancy_ranks`: the allocator's successive choices among the GPUs
free now (rank 0 is its own choice for the next one-GPU claim; rank 1 its choice were rank 0 taken
too, for a claim the scheduler places before we hear of the first), then the GPUs in use in their
static order.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import combinations

from device_plugin.dra.covering_sets import COVERING_MAX_GPUS
from device_plugin.dra_helper.api.devices import Attribute
from device_plugin.gpu_sets import Allocator

RANK_ATTRIBUTE = "singleGPURank"  # in our own domain
# the attribute a whole GPU's device carries (not a MIG device)
WHOLE_GPU: Attribute = ("type", "string", "gpu")


def single_gpu_order(allocator: Allocator, gpus: Sequence[int]) -> tuple[int, ...]:
    """`gpus` in the order one-GPU claims should take them (rank 0 first)."""
    if len(gpus) <= COVERING_MAX_GPUS:
        return _most_situations_order(allocator, sorted(gpus))
    return _successive_order(allocator, sorted(gpus))


def occupancy_ranks(
    allocator: Allocator, static: Mapping[int, int], unavailable: Collection[int]
) -> dict[int, int]:
    """GPU index -> rank with the GPUs of `unavailable` (held by claims, or unhealthy) in use;
    `static` is the inventory's rank of every GPU ranked (its keys are the GPUs)."""
    free = sorted(g for g in static if g not in unavailable)
    busy = sorted((g for g in static if g in unavailable), key=lambda g: static[g])
    order = (*_successive_order(allocator, free), *busy) if free else tuple(busy)
    return {gpu: rank for rank, gpu in enumerate(order)}


def _successive_order(allocator: Allocator, gpus: list[int]) -> tuple[int, ...]:
    left, order = list(gpus), []
    while left:
        (chosen,) = allocator.allocate(left, [], 1)
        order.append(chosen)
        left.remove(chosen)
    return tuple(order)


def _most_situations_order(allocator: Allocator, gpus: list[int]) -> tuple[int, ...]:
    situations = [free for size in range(1, len(gpus) + 1) for free in combinations(gpus, size)]
    best = {free: _optimal_choices(allocator, list(free)) for free in situations}
    undecided = set(situations)
    order: list[int] = []
    for _ in gpus:
        candidates = [g for g in gpus if g not in order]
        gains = {
            g: sum(1 if g in best[free] else -1 for free in undecided if g in free)
            for g in candidates
        }
        chosen = max(candidates, key=lambda g: (gains[g], -g))  # ties: the lower index
        order.append(chosen)
        undecided = {free for free in undecided if chosen not in free}
    return tuple(order)


def _optimal_choices(allocator: Allocator, free: list[int]) -> set[int]:
    """The GPUs of `free` that a one-GPU request could take as well as the allocator's own
    choice."""
    top = allocator.explain(free, [], 1).chosen
    want = (top.score, top.fragmentation)
    return {g for g in free if _scores(allocator, free, g) == want}


def _scores(allocator: Allocator, free: list[int], gpu: int) -> tuple[object, object]:
    only = allocator.explain(free, [gpu], 1).chosen  # must include it: the one candidate
    return only.score, only.fragmentation
