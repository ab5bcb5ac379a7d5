"""Replay pods arriving and leaving on one node under a policy, and measure allocation quality.

Trace format (text, one event per line; `#` starts a comment, blank lines are ignored):

    <time_s> start <pod> <gpus>     a pod asking for <gpus> whole GPUs arrives
    <time_s> stop <pod>             the pod leaves and frees its GPUs

Times are seconds, non-decreasing; pod names are unique among running pods. A pod that asks for
more GPUs than are free is not placed (counted as unplaced; identical under every policy, since only
the number of free GPUs decides it). `generate_workload` writes such events from a seed.

Per placed pod we record the predicted ring bandwidth of its set (objective criterion 1), the best
ring among the GPUs free at that moment, and the best ring an empty node gives at that size.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from device_plugin.core.errors import ConfigError
from device_plugin.gpu_sets.allocator import Allocator

DEFAULT_SIZE_WEIGHTS = ((1, 0.4), (2, 0.3), (4, 0.2), (8, 0.1))

# (GPUs free in kubelet order, must_include, size) -> chosen GPU indices
Policy = Callable[[Sequence[int], Sequence[int], int], tuple[int, ...]]


@dataclass(frozen=True)
class Event:
    time_s: float
    kind: str  # "start" or "stop"
    pod: str
    gpus: int = 0


@dataclass(frozen=True)
class Placement:
    pod: str
    size: int
    chosen: tuple[int, ...]
    ring_gbps: float
    best_free_gbps: float
    best_empty_gbps: float
    all_nic_close: bool = False  # every GPU of the set has a GPUDirect-close NIC (criterion 4)


@dataclass(frozen=True)
class SimulationResult:
    placements: tuple[Placement, ...]
    unplaced: int

    def sizes(self) -> list[int]:
        return sorted({p.size for p in self.placements})

    def mean_ring_gbps(self, size: int) -> float:
        rings = [p.ring_gbps for p in self.placements if p.size == size]
        return sum(rings) / len(rings) if rings else 0.0

    def multi_gpu(self) -> list[Placement]:
        return [p for p in self.placements if p.size >= 2]

    def optimal_share(self) -> float:
        """Share of multi-GPU pods whose ring equals the best among the GPUs free at that moment."""
        multi = self.multi_gpu()
        return sum(p.ring_gbps >= p.best_free_gbps for p in multi) / len(multi) if multi else 1.0

    def all_nic_close_share(self, size: int) -> float | None:
        """Share of `size`-GPU pods whose GPUs all have a GPUDirect-close NIC; None when there were
        none."""
        pods = [p for p in self.placements if p.size == size]
        return sum(p.all_nic_close for p in pods) / len(pods) if pods else None

    def hurt_by_fragmentation(self) -> int:
        """Multi-GPU pods whose ring is below what the same request gets on an empty node."""
        return sum(p.ring_gbps < p.best_empty_gbps for p in self.multi_gpu())


def parse_trace(lines: Iterable[str], source: str = "trace") -> list[Event]:
    events: list[Event] = []
    running: set[str] = set()
    last = float("-inf")
    for number, raw in enumerate(lines, start=1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        where = f"{source}:{number}"
        parts = text.split()
        try:
            time_s = float(parts[0])
        except (ValueError, IndexError):
            raise ConfigError(
                where, f"{text!r}: expected '<time_s> start <pod> <gpus>' or '<time_s> stop <pod>'"
            ) from None
        if time_s < last:
            raise ConfigError(where, f"time {time_s} goes back from {last}")
        last = time_s
        if len(parts) == 4 and parts[1] == "start":
            if not parts[3].isdigit() or int(parts[3]) < 1:
                raise ConfigError(where, f"GPU count {parts[3]!r} must be a positive whole number")
            if parts[2] in running:
                raise ConfigError(where, f"pod {parts[2]!r} is already running")
            running.add(parts[2])
            events.append(Event(time_s, "start", parts[2], int(parts[3])))
        elif len(parts) == 3 and parts[1] == "stop":
            if parts[2] not in running:
                raise ConfigError(where, f"pod {parts[2]!r} is not running")
            running.discard(parts[2])
            events.append(Event(time_s, "stop", parts[2]))
        else:
            raise ConfigError(
                where, f"{text!r}: expected '<time_s> start <pod> <gpus>' or '<time_s> stop <pod>'"
            )
    return events


def generate_workload(
    gpu_count: int, seed: int, pods: int = 300, load: float = 0.75
) -> list[Event]:
    """Poisson arrivals (1 per second), exponential lifetimes sized so the node is about `load`
    busy."""
    rng = random.Random(seed)
    weights = [(s, w) for s, w in DEFAULT_SIZE_WEIGHTS if s <= gpu_count]
    sizes, probabilities = zip(*weights, strict=True)
    mean_size = sum(s * w for s, w in weights) / sum(probabilities)
    mean_life_s = load * gpu_count / mean_size
    timed: list[tuple[float, int, Event]] = []
    now = 0.0
    for i in range(pods):
        now += rng.expovariate(1.0)
        size = rng.choices(sizes, probabilities)[0]
        pod = f"pod-{i:04d}"
        timed.append((now, 1, Event(now, "start", pod, size)))
        end = now + rng.expovariate(1.0 / mean_life_s)
        timed.append((end, 0, Event(end, "stop", pod)))
    return [event for _, _, event in sorted(timed, key=lambda t: (t[0], t[1], t[2].pod))]


def replay(
    allocator: Allocator, events: Sequence[Event], policy: Policy, seed: int
) -> SimulationResult:
    """Run the events; the kubelet's device order is shuffled by a generator seeded with `seed`."""
    n = allocator.topology.gpu_count
    rng = random.Random(seed)
    free = set(range(n))
    held: dict[str, tuple[int, ...]] = {}
    placements: list[Placement] = []
    unplaced = 0
    for event in events:
        if event.kind == "stop":
            free.update(held.pop(event.pod, ()))
            continue
        if event.gpus > len(free):
            unplaced += 1
            continue
        order = sorted(free)
        rng.shuffle(order)
        chosen = tuple(sorted(policy(order, [], event.gpus)))
        if len(chosen) != event.gpus or not set(chosen) <= free:
            raise ValueError(f"policy returned {chosen} for {event.gpus} of {sorted(free)}")
        best_free = allocator.allocate(sorted(free), [], event.gpus)
        placements.append(
            Placement(
                pod=event.pod,
                size=event.gpus,
                chosen=chosen,
                ring_gbps=allocator.score(chosen).ring_gbps,
                best_free_gbps=allocator.score(best_free).ring_gbps,
                best_empty_gbps=allocator.best_possible_mbps(event.gpus) / 1000,
                all_nic_close=allocator.score(chosen).close_nic_gpus == event.gpus,
            )
        )
        free.difference_update(chosen)
        held[event.pod] = chosen
    return SimulationResult(tuple(placements), unplaced)


def policies(allocator: Allocator) -> dict[str, Policy]:
    """The policies compared: ours, first-fit in kubelet order, NVIDIA's pairwise partition, and on
    a node with RDMA NICs also ours without criterion 4 (the same objective, NIC-blind)."""
    from device_plugin.gpu_sets.baselines import PairwisePartitionPolicy, first_fit

    nvidia = PairwisePartitionPolicy(allocator.topology)
    out: dict[str, Policy] = {
        "topology-aware (ours)": allocator.allocate,
        "first-fit (kubelet order)": first_fit,
        "pairwise partition (NVIDIA-style)": nvidia.choose,
    }
    if allocator.topology.nic_count:
        blind = Allocator(replace(allocator.topology, nic_names=(), nic_levels=()))
        out["topology-aware without the NIC criterion"] = blind.allocate
    return out
