"""rankedSetK<A..F>: groupings numbered in listing order, covering the best sets that one disjoint grouping
(bestSetK) leaves out. On nodes of up to 8 GPUs, whatever GPUs are free, the first grouping with a whole group
free gives (by Kubernetes' first fit) a set optimal among the free ones; on larger nodes each grouping holds
sets of one score, best first."""

from __future__ import annotations

from itertools import chain, combinations

import pytest

from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.covering_sets import COVERING_MAX_GPUS
from device_plugin.dra.inventory import DraDevice, build_devices
from device_plugin.dra.ranked_sets import GROUPINGS, LETTERS, RANKED_SIZES, ranked_groupings, score_order
from device_plugin.gpu_sets import Allocator
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml
from tests.allocation.machines import allocator_of, topology_of
from tests.dra.machine_devices import devices_of

MACHINES = shipped_machine_names()


def groupings_published(devices: tuple[DraDevice, ...], size: int) -> dict[str, dict[int, list[int]]]:
    """attribute -> value -> GPU indices in listing order, for rankedSet<size><letter>."""
    out: dict[str, dict[int, list[int]]] = {}
    for device in devices:
        for name, _, value in device.attributes:
            short = name.removeprefix(f"{OWN_DOMAIN}/")
            if short.startswith(f"rankedSet{size}") and short[len(f"rankedSet{size}") :] in LETTERS:
                out.setdefault(short, {}).setdefault(int(value), []).append(device.gpu_index)
    return dict(sorted(out.items()))


def whole_gpu_places(devices: tuple[DraDevice, ...]) -> dict[int, int]:
    return {d.gpu_index: i for i, d in enumerate(devices) if d.name.count("-") == 1}  # gpu-N, not gpu-N-mig-..


@pytest.mark.parametrize("size", RANKED_SIZES, ids=[f"{k}-sets" for k in RANKED_SIZES])
@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
def test_groupings_are_lettered_in_order_of_disjoint_k_sets_numbered_in_listing_order(machine: str, size: int) -> None:
    devices, _ = devices_of(machine)
    place = whole_gpu_places(devices)
    published = groupings_published(devices, size)
    assert list(published) == [f"rankedSet{size}{letter}" for letter in LETTERS[: len(published)]]
    assert len(published) <= GROUPINGS[size]
    assert bool(published) == (size <= len(place) <= 16)
    for groups in published.values():
        assert all(len(members) == size for members in groups.values())  # exactly K GPUs a value
        assert sorted(groups) == list(range(len(groups)))
        firsts = [min(place[g] for g in groups[value]) for value in sorted(groups)]
        assert firsts == sorted(firsts)  # numbered in listing order


def first_fit(published: dict[str, dict[int, list[int]]], free: set[int]) -> tuple[int, ...] | None:
    """What Kubernetes' allocator takes when a claim tries the groupings in letter order: in the first one with a
    wholly free group, that group (groups are numbered in listing order, so the lowest number comes first)."""
    for groups in published.values():
        for value in sorted(groups):
            if free.issuperset(groups[value]):
                return tuple(sorted(groups[value]))
    return None


SMALL = [m for m in MACHINES if 2 <= len(whole_gpu_places(devices_of(m)[0])) <= COVERING_MAX_GPUS]


@pytest.mark.parametrize("size", RANKED_SIZES, ids=[f"{k}-sets" for k in RANKED_SIZES])
@pytest.mark.parametrize("machine", SMALL, ids=SMALL)
def test_whatever_is_free_a_set_the_groupings_give_is_optimal_among_the_free_gpus(machine: str, size: int) -> None:
    devices, _ = devices_of(machine)
    allocator = allocator_of(machine)
    whole = sorted(whole_gpu_places(devices))
    published = groupings_published(devices, size)
    decided = 0
    for free in chain.from_iterable(combinations(whole, r) for r in range(size, len(whole) + 1)):
        taken = first_fit(published, set(free))
        if taken is None:
            continue  # no grouping applies: the claim goes on to one NUMA node, then any K
        best = max(score_order(allocator.score(c)) for c in combinations(free, size))
        assert score_order(allocator.score(taken)) == best, f"free {free}: took {taken}"
        decided += 1
    assert decided > 0 or size > len(whole)


LARGE = [m for m in MACHINES if len(whole_gpu_places(devices_of(m)[0])) > COVERING_MAX_GPUS]


@pytest.mark.parametrize("size", RANKED_SIZES, ids=[f"{k}-sets" for k in RANKED_SIZES])
@pytest.mark.parametrize("machine", LARGE, ids=LARGE)
def test_on_larger_nodes_each_grouping_holds_sets_of_one_score_better_than_the_next(machine: str, size: int) -> None:
    devices, _ = devices_of(machine)
    allocator = allocator_of(machine)
    published = groupings_published(devices, size)
    previous = None
    for groups in published.values():
        (score,) = {score_order(allocator.score(members)) for members in groups.values()}  # one score
        assert previous is None or score <= previous  # A >= B >= C >= ...
        previous = score
    whole = sorted(whole_gpu_places(devices))
    best = max(score_order(allocator.score(c)) for c in combinations(whole, size))
    first = next(iter(published.values()))
    assert score_order(allocator.score(first[0])) == best  # A is the best tier of the node


# Machines whose best tier of pairs one grouping cannot cover: every such pair must still be a group.
COVERED = {
    "dgx1-v100: the 4 NV2 pairs": ("dgx1-v100", 2),
    "hgx-h100: the 12 same-socket pairs need 3 groupings": ("hgx-h100", 2),
    "pcie-8gpu-2socket: the best 4-sets": ("pcie-8gpu-2socket", 4),
    "pcie-8gpu-2nic: the best 4-sets": ("pcie-8gpu-2nic", 4),
}


@pytest.mark.parametrize(("machine", "size"), COVERED.values(), ids=COVERED.keys())
def test_every_set_of_the_best_score_is_a_group_of_some_ranked_grouping(machine: str, size: int) -> None:
    topology = topology_of(machine)
    allocator = Allocator(topology)
    gpus = list(range(topology.gpu_count))
    scores = {c: score_order(allocator.score(c)) for c in combinations(gpus, size)}
    best = max(scores.values())
    devices, _ = build_devices(FakeNvml.from_machine(machine), topology)
    groups = {
        tuple(sorted(members))
        for grouping in groupings_published(devices, size).values()
        for members in grouping.values()
    }
    assert {c for c, s in scores.items() if s == best} <= groups


def test_no_groupings_without_enough_gpus_or_budget() -> None:
    allocator = allocator_of("island-16gpu")
    assert len(ranked_groupings(allocator, list(range(16)), 4)) == GROUPINGS[4]  # 16 GPUs: enumerated
    assert ranked_groupings(allocator, list(range(16)), 4, budget=0) == ()
    assert ranked_groupings(allocator, [0, 1, 2], 4) == ()  # fewer GPUs than the size


def shipped_chain(devices: tuple[DraDevice, ...], size: int, free: set[int]) -> tuple[int, ...]:
    """The example claims' whole firstAvailable chain: the groupings, then one NUMA node, then any K (first fit)."""
    taken = first_fit(groupings_published(devices, size), free)
    if taken is not None:
        return taken
    listed = [d for d in devices if d.name.count("-") == 1 and d.gpu_index in free]
    numa = {
        d.gpu_index: dict((n, v) for n, _, v in d.attributes).get("resource.kubernetes.io/numaNode") for d in listed
    }
    for node in dict.fromkeys(numa.values()):
        members = [g for g in numa if numa[g] == node]
        if node is not None and len(members) >= size:
            return tuple(sorted(members[:size]))
    return tuple(sorted(d.gpu_index for d in listed[:size]))


# Free GPUs where the tier-pure groupings left the claim to "any 4" and it took a worse set (issue 30).
FELL_THROUGH = {
    "dgx1-v100 free 1,2,3,4,7 (the issue's example)": ("dgx1-v100", {1, 2, 3, 4, 7}),
    "pcie-8gpu-2nic free 1,3,4,5,7 (trace seed 4)": ("pcie-8gpu-2nic", {1, 3, 4, 5, 7}),
}


@pytest.mark.parametrize(("machine", "free"), FELL_THROUGH.values(), ids=FELL_THROUGH.keys())
def test_the_shipped_chain_lands_on_an_optimal_4_set_where_it_fell_through_before(machine: str, free: set[int]) -> None:
    devices, _ = devices_of(machine)
    allocator = allocator_of(machine)
    taken = shipped_chain(devices, 4, free)
    best = max(score_order(allocator.score(c)) for c in combinations(sorted(free), 4))
    assert score_order(allocator.score(taken)) == best, taken
