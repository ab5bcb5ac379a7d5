"""A model of Kubernetes' structured allocator on one node, and the shipped example claims it replays.

Used by bench_dra.py (c). The allocator searches devices in slice listing order and takes the first set
that satisfies a request's count and its `matchAttribute` constraints; `firstAvailable` alternatives are
tried in order and the first that can be satisfied wins. Here: `first_fit` is that search (the
lexicographically first combination in listing order), and `shipped_alternatives` reads the
`firstAvailable` claims of deploy/dra/examples, so the figures are those of the claims we ship, not of a
copy. Sizes without a shipped claim are placed by count only (the first free devices).

Scenario `firstAvailable` is what the driver does: after every change of the GPUs in use (a claim placed or
gone; the driver hears of it by the Prepare or Unprepare) the attribute values are those the driver
republishes (occupancy.occupancy_overrides, the driver's own function: singleGPURank and rankedSet4A);
`firstAvailable-static` keeps the inventory's static values, which is what the scheduler sees while such a
republish is on its way.

A claim "lands on an optimal set" when the allocator's own score (criteria 1-4) of the GPUs it got equals
that of the best set among the GPUs free at that moment (Allocator.allocate over the free ones).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from device_plugin.dra.inventory import build_devices
from device_plugin.dra.occupancy import occupancy_overrides
from device_plugin.gpu_sets import Allocator
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from testbed.placement_quality import optimal

SIZES = (1, 2, 4, 8)  # the claim sizes of the trace, each reported
EXAMPLES = Path(__file__).resolve().parents[1] / "deploy" / "dra" / "examples" / "claim-templates.yaml"
Device = tuple[int, dict[str, object]]  # (GPU index, attributes by qualified name)


@dataclass(frozen=True)
class Alternative:
    """One `firstAvailable` alternative: a matchAttribute over its devices, and/or a selector attribute == value."""

    match: str | None = None
    select: tuple[str, int] | None = None


COUNT_ONLY = Alternative()
Alternatives = dict[int, list[Alternative]]  # size -> its alternatives in order
Placer = Callable[[Sequence[Device], int], "tuple[int, ...] | None"]
# The one selector form the shipped claims use (an attribute of ours equal to an integer, guarded by `in`).
_SELECTOR = re.compile(
    r'^"(?P<name>\w+)" in device\.attributes\["(?P<domain>[\w.-]+)"\] && '
    r'device\.attributes\["(?P=domain)"\]\.(?P=name) == (?P<value>[0-9]+)\Z'
)


def first_fit(free: Sequence[Device], size: int, alternative: Alternative = COUNT_ONLY) -> tuple[int, ...] | None:
    """The first set, in listing order, of devices the selector admits, satisfying the count and (when given) one
    value of the matchAttribute."""
    if alternative.select is not None:
        name, value = alternative.select
        free = [d for d in free if d[1].get(name) == value]
    if len(free) < size:
        return None
    if alternative.match is None:
        return tuple(g for g, _ in free[:size])
    for combo in itertools.combinations(free, size):
        values = {a.get(alternative.match) for _, a in combo}
        if len(values) == 1 and None not in values:
            return tuple(g for g, _ in combo)
    return None


def selector_of(sub: dict[str, Any]) -> tuple[str, int] | None:
    """The (qualified attribute, value) of a subrequest's one CEL selector; None without one; else refused."""
    selectors = sub.get("selectors", [])
    if not selectors:
        return None
    ((only,),) = [list(s.values()) for s in selectors]
    found = _SELECTOR.match(" ".join(only["expression"].split()))
    if found is None:
        raise ValueError(f"the model reads only `attribute == integer` selectors, not {only['expression']!r}")
    return f"{found['domain']}/{found['name']}", int(found["value"])


def shipped_alternatives(path: Path = EXAMPLES) -> Alternatives:
    """For each size with a `firstAvailable` example: its alternatives, in order."""
    out: Alternatives = {}
    for template in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        devices: dict[str, Any] = template["spec"]["spec"]["devices"]
        (request,) = devices["requests"]
        if "firstAvailable" not in request:
            continue
        match = {c["requests"][0]: c["matchAttribute"] for c in devices.get("constraints", [])}
        subs = request["firstAvailable"]
        (size,) = {sub["count"] for sub in subs}
        out[size] = [Alternative(match.get(f"{request['name']}/{sub['name']}"), selector_of(sub)) for sub in subs]
    return out


def placer(scenario: str, alternatives: Alternatives, own_domain: str) -> Placer:
    """How a claim of a size is placed: by count only, on `bestSetK`, or by the shipped examples."""

    def place(free: Sequence[Device], size: int) -> tuple[int, ...] | None:
        if scenario == "bestSetK" and size > 1:
            return first_fit(free, size, Alternative(f"{own_domain}/bestSet{size}"))
        tries = alternatives.get(size, [COUNT_ONLY]) if scenario.startswith("firstAvailable") else [COUNT_ONLY]
        for alternative in tries:
            chosen = first_fit(free, size, alternative)
            if chosen is not None:
                return chosen
        return None

    return place


def trace(seed: int, claims: int) -> list[tuple[str, int]]:
    """Seeded arrivals and departures: ("+", size) arrives, ("-", k) releases the k-th oldest running claim."""
    rng = random.Random(seed)
    events: list[tuple[str, int]] = []
    running = 0
    for _ in range(claims):
        while running and rng.random() < 0.5:
            events.append(("-", rng.randrange(running)))
            running -= 1
        events.append(("+", rng.choices((1, 2, 4, 8), weights=(40, 30, 20, 10))[0]))
        running += 1
    return events


def replay(
    machine: str,
    scenario: str,
    events: list[tuple[str, int]],
    alternatives: Alternatives,
    own_domain: str,
    hints: str = "full",
) -> tuple[dict[int, list[int]], int, int]:
    """(size -> [optimal among the free, placed] for 1, 2, 4 and 8, claims unplaced while enough GPUs were free,
    bestSetK claims refused while a whole group of theirs was free). A claim of 2 or more GPUs is optimal when
    its set scores as the best set among the free GPUs (criteria 1-4); a 1-GPU claim, where criteria 1-3 tie,
    when its GPU is as good as the allocator's own choice by criteria 4 and 5 (NIC, and what it leaves free)."""
    fake = FakeNvml.from_machine(machine)
    topology = build_topology(fake)
    devices, _ = build_devices(fake, topology, own_domain=own_domain, hints=hints)  # placementHints
    whole = [d for d in devices if ("type", "string", "gpu") in d.attributes]  # MIG devices: other claims
    listing: list[Device] = [(d.gpu_index, {n: v for n, _, v in d.attributes}) for d in whole]
    if scenario == "index":
        listing.sort(key=lambda d: d[0])
    allocator = Allocator(topology)
    place = placer(scenario, alternatives, own_domain)
    built = [(d.gpu_index, d.attributes) for d in whole]
    static_listing = list(listing)
    republished = scenario == "firstAvailable"
    held: dict[int, tuple[int, ...]] = {}
    order: list[int] = []  # running claims, oldest first
    stats: dict[int, list[int]] = {size: [0, 0] for size in SIZES}
    unplaced = missed = 0
    for serial, (kind, value) in enumerate(events):
        if kind == "-":
            if order:
                held.pop(order.pop(value % len(order)))
            continue
        busy = {g for gpus in held.values() for g in gpus}
        if republished:  # the hints the driver republished after the last change (its own function)
            overrides = occupancy_overrides(allocator, built, busy, own_domain)
            listing = [(g, {**a, **overrides.get(g, {})}) for g, a in static_listing]
        free = [d for d in listing if d[0] not in busy]
        chosen = place(free, value)
        if chosen is None:
            unplaced += len(free) >= value
            key = f"{own_domain}/bestSet{value}"
            groups = {a[key] for _, a in listing if key in a}
            missed += scenario == "bestSetK" and any(
                all(g not in busy for g, a in listing if a.get(key) == group) for group in groups
            )
            continue
        held[serial] = chosen
        order.append(serial)
        if value in stats:
            stats[value][1] += 1
            stats[value][0] += optimal(allocator, [g for g, _ in free], chosen)
    return stats, unplaced, missed
