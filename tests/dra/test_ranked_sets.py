"""rankedSetK<A..D>: groupings of one score each, best first, numbered in listing order, covering the best sets
that one disjoint grouping (bestSetK) leaves out."""

from __future__ import annotations

from itertools import combinations

import pytest

from device_plugin.allocator import Allocator
from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.inventory import DraDevice, build_devices
from device_plugin.dra.ranked_sets import GROUPINGS_PER_SIZE, LETTERS, RANKED_SIZES, ranked_groupings, score_order
from device_plugin.nvml.catalog import shipped_machine_names
from device_plugin.nvml.fake import FakeNvml
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


@pytest.mark.parametrize("size", RANKED_SIZES, ids=[f"{k}-sets" for k in RANKED_SIZES])
@pytest.mark.parametrize("machine", MACHINES, ids=MACHINES)
def test_each_grouping_holds_disjoint_sets_of_one_score_better_than_the_next_numbered_in_listing_order(
    machine: str, size: int
) -> None:
    devices, _ = devices_of(machine)
    allocator = allocator_of(machine)
    place = {d.gpu_index: i for i, d in enumerate(devices) if d.name.count("-") == 1}  # whole GPUs
    published = groupings_published(devices, size)
    assert list(published) == [f"rankedSet{size}{letter}" for letter in LETTERS[: len(published)]]
    assert len(published) <= GROUPINGS_PER_SIZE
    previous = None
    for groups in published.values():
        assert all(len(members) == size for members in groups.values())  # exactly K GPUs a value
        assert sorted(groups) == list(range(len(groups)))
        firsts = [min(place[g] for g in groups[value]) for value in sorted(groups)]
        assert firsts == sorted(firsts)  # numbered in listing order
        (score,) = {score_order(allocator.score(members)) for members in groups.values()}  # one score
        assert previous is None or score <= previous  # A >= B >= C >= D
        previous = score
    whole = len(place)
    if size <= whole <= 16:
        best = max(score_order(allocator.score(c)) for c in combinations(sorted(place), size))
        assert published and previous is not None
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
    assert len(ranked_groupings(allocator, list(range(16)), 4)) == GROUPINGS_PER_SIZE  # 16 GPUs: enumerated
    assert ranked_groupings(allocator, list(range(16)), 4, budget=0) == ()
    assert ranked_groupings(allocator, [0, 1, 2], 4) == ()  # fewer GPUs than the size
