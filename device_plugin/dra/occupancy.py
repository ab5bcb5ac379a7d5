"""Attribute values that follow the GPUs in use: what the driver republishes after each Prepare and
Unprepare.

Boundary: pure, over an Allocator and the inventory's devices; no locks, no Kubernetes objects
(front_end.py calls it under its lock and hands the result to the publisher).

Why: Kubernetes' allocator knows nothing of our objective; it takes, for each `firstAvailable`
alternative of a claim, the first free devices in listing order that the alternative's selector and
constraints admit. The inventory's static values (singleGPURank, rankedSet4A..F) are the best one
order can do for every set of free GPUs at once, and some sets of free GPUs no static order decides
well (issue 33: a one-GPU claim should take a GPU whose NVLink partner is busy). Once claims hold
GPUs the driver knows which (the helper's Driver.held), so
it republishes two hints for the situation at hand:
- `singleGPURank`: the allocator's successive one-GPU choices among the free GPUs, then the GPUs in
  use (single_order.occupancy_ranks). The shipped one-GPU claim tries rank 0, 1, ... and so gets the
  allocator's own choice;
- `rankedSet4A` (the first alternative of the shipped 4-GPU claim): group 0 is the allocator's best
  4-set among the free GPUs, every other GPU a group of its own, so that alternative can only take
  that set; B..F keep the static covering groupings for a claim placed before the republish lands.
With no GPU in use the static values stay; so does rankedSet4A with fewer than 4 GPUs free, or when
the best free set holds a GPU the covering grouping left without a value (values are replaced, never
added: a device may carry 32 attributes and a DGX-1's GPU carries 32). The static values are always
the fallback: a republish on its way, or lost, costs placement quality only, never a wrong
allocation.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from device_plugin.core.names import own_name
from device_plugin.dra.ranked_sets import LETTERS
from device_plugin.dra.single_order import RANK_ATTRIBUTE, WHOLE_GPU, occupancy_ranks
from device_plugin.dra_helper.api.devices import Attribute
from device_plugin.gpu_sets import Allocator

FIRST_FOUR = f"rankedSet4{LETTERS[0]}"
Overrides = Mapping[int, Mapping[str, int]]  # GPU index -> {qualified attribute: value now}


def occupancy_overrides(
    allocator: Allocator,
    whole: Iterable[tuple[int, Sequence[Attribute]]],
    unavailable: Collection[int],
    domain: str,
) -> dict[int, dict[str, int]]:
    """The values to publish instead of the static ones, for the whole GPUs `whole` ((index,
    attributes), as the inventory built them) with `unavailable` (held, or unhealthy) in use; {}
    while none is."""
    gpus = dict(whole)
    if not unavailable or not gpus:
        return {}
    out: dict[int, dict[str, int]] = {gpu: {} for gpu in gpus}
    rank, four = own_name(domain, RANK_ATTRIBUTE), own_name(domain, FIRST_FOUR)
    static = _values(gpus, rank)
    if static:
        for gpu, value in occupancy_ranks(allocator, static, unavailable).items():
            out[gpu][rank] = value
    # a covering grouping may leave a GPU out: it carries no value to change
    carriers = _values(gpus, four)
    free = sorted(g for g in gpus if g not in unavailable)
    best = set(allocator.allocate(free, [], 4)) if carriers and len(free) >= 4 else set()
    if best and best <= set(carriers):  # else the static grouping stays: the set cannot be offered
        others = iter(range(1, len(carriers) + 1))
        for gpu in sorted(carriers):
            out[gpu][four] = 0 if gpu in best else next(others)
    return {gpu: values for gpu, values in out.items() if values}


def with_values(
    attributes: Sequence[Attribute], values: Mapping[str, int]
) -> tuple[Attribute, ...]:
    """`attributes` with each int attribute named in `values` set to its value there."""
    return tuple((n, kind, values[n]) if n in values else (n, kind, v) for n, kind, v in attributes)


def is_whole_gpu(attributes: Sequence[Attribute]) -> bool:
    return WHOLE_GPU in attributes


def _values(gpus: Mapping[int, Sequence[Attribute]], name: str) -> dict[int, int]:
    values = {gpu: v for gpu, attrs in gpus.items() for n, _, v in attrs if n == name}
    return {gpu: int(v) for gpu, v in values.items()}  # type: ignore[call-overload]
