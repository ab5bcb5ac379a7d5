"""Topology-aware choice of whole GPUs: the objective, the exact and bounded searches, explanations.

`Allocator(topology)` precomputes at construction (exact tables for <= 16 GPUs) and then answers
`allocate(available, must_include, size) -> ascending GPU indices` as a pure function of its
arguments: no I/O, no clock, and the answer never depends on the order of the input lists. The
objective is written down in device_plugin.gpu_sets.objective. Invalid input raises
InvalidRequestError and nothing else.

One way to choose: allocate() (every caller: the device plugin's whole-GPU policy, the DRA
partitions and hints, the simulation) checks its index-level arguments once, in _validate;
describe() then says what the metric and the log line need of a chosen set, and explain() answers
the CLI's and the DRA ranks' question "why these, and what came second". The resource boundary
(device_plugin.allocation.request) checks the kubelet's device IDs; the allocator checks only that
its own indices make a request.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import device_plugin.gpu_sets.exact as exact
from device_plugin.core.errors import InvalidRequestError
from device_plugin.gpu_sets.bounded import search_bounded
from device_plugin.gpu_sets.decision import AllocationDecision, Candidate, Explanation, why_lost
from device_plugin.gpu_sets.nic import NicGroups
from device_plugin.gpu_sets.objective import FragmentationScore, SetScore, key_ring, pack_key
from device_plugin.gpu_sets.ring import ring_of_set
from device_plugin.gpu_sets.tables import MAX_EXACT_GPUS, build_tables
from device_plugin.topology.model import Topology

__all__ = [
    "MAX_EXACT_GPUS",
    "AllocationDecision",
    "Allocator",
    "Explanation",
    "InvalidRequestError",
]


def _indices(values: Iterable[int], what: str, gpu_count: int) -> list[int]:
    try:
        items = list(values)
    except TypeError:
        raise InvalidRequestError(f"{what} must be a list of GPU indices") from None
    for value in items:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequestError(f"{what}: {value!r} is not a GPU index")
        if not 0 <= value < gpu_count:
            raise InvalidRequestError(
                f"{what}: GPU {value} does not exist; this node has GPUs 0..{gpu_count - 1}"
            )
    if len(set(items)) != len(items):
        duplicates = sorted({v for v in items if items.count(v) > 1})
        raise InvalidRequestError(f"{what}: GPU(s) {duplicates} listed more than once")
    return sorted(items)


class Allocator:
    """Answers allocation requests for one Topology; build once per node (construction
    precomputes)."""

    def __init__(self, topology: Topology) -> None:
        self._topology = topology
        self._n = topology.gpu_count
        if self._n < 1:
            raise InvalidRequestError("a node without GPUs has nothing to allocate")
        self._bw = topology.bandwidth_mbps_matrix()
        self._numa = tuple(-1 if node is None else node for node in topology.numa_nodes)
        self._nics = NicGroups.of(topology)
        self._tables = None
        if self._n <= MAX_EXACT_GPUS:
            ranks = self._nics.ranks(self._n) if self._nics.any else None
            self._tables = build_tables(
                self._bw, topology.numa_nodes, ranks, tiers=topology.bandwidth_tiers
            )
        self._best_empty: dict[int, int] = {}
        self._levels = (
            tuple(
                tuple(frozenset(group) for group in tier.groups)
                for tier in topology.bandwidth_tiers
            )
            if self._tables is None
            else ()
        )

    @property
    def topology(self) -> Topology:
        return self._topology

    @property
    def exact(self) -> bool:
        return self._tables is not None

    def _validate(
        self, available: Iterable[int], must_include: Iterable[int], size: int
    ) -> tuple[list[int], list[int]]:
        if isinstance(size, bool) or not isinstance(size, int):
            raise InvalidRequestError(f"size: {size!r} is not a whole number")
        avail = _indices(available, "available", self._n)
        must = _indices(must_include, "must_include", self._n)
        missing = sorted(set(must) - set(avail))
        if missing:
            raise InvalidRequestError(f"must_include: GPU(s) {missing} are not available")
        if size < 1:
            raise InvalidRequestError(f"size: {size}; a request needs at least 1 GPU")
        if size > len(avail):
            raise InvalidRequestError(
                f"size: {size} GPUs requested but only {len(avail)} available"
            )
        if len(must) > size:
            raise InvalidRequestError(
                f"must_include: {len(must)} GPUs do not fit in a request of {size}"
            )
        return avail, must

    def _choose(self, avail: list[int], must: list[int], size: int) -> tuple[int, ...]:
        if size == len(avail):
            return tuple(avail)  # no choice to make
        if self._tables is None:
            return search_bounded(self._bw, self._numa, self._levels, avail, must, size)
        mask = exact.search(self._tables, _mask(avail), _mask(must), size)
        return _members(mask)

    def allocate(
        self, available: Iterable[int], must_include: Iterable[int], size: int
    ) -> tuple[int, ...]:
        """The best `size` GPUs (ascending indices) of `available` containing every
        `must_include`."""
        avail, must = self._validate(available, must_include, size)
        return self._choose(avail, must, size)

    def score(self, gpus: Iterable[int]) -> SetScore:
        """Criteria 1-4 of any set of GPUs of this node (ring exact up to 16 GPUs in the set)."""
        members = _indices(gpus, "gpus", self._n)
        if not members:
            raise InvalidRequestError("gpus: an empty set has no score")
        return self._set_score(self._key(members), _mask(members))

    def _set_score(self, key: int, mask: int) -> SetScore:
        return replace(
            SetScore.unpack(key),
            close_nic_gpus=self._nics.close_count(mask),
            distinct_close_nics=self._nics.rails(mask),
        )

    def _key(self, members: list[int]) -> int:
        if self._tables is not None:
            return self._tables.key[_mask(members)]
        total = sum(self._bw[a][b] for i, a in enumerate(members) for b in members[i + 1 :])
        numa = len({self._numa[m] for m in members})
        return pack_key(
            ring_of_set(self._bw, members), total, numa, self._nics.rank(_mask(members))
        )

    def best_possible_mbps(self, size: int) -> int:
        """The best ring of any `size` GPUs of this node when every GPU is free."""
        if size not in self._best_empty:
            if not 1 <= size <= self._n:
                raise InvalidRequestError(f"size: {size}; this node has {self._n} GPUs")
            if self._tables is not None:
                best = self._tables.ring[self._tables.order[size][0]]
            else:
                best = key_ring(
                    self._key(
                        list(
                            search_bounded(
                                self._bw, self._numa, self._levels, list(range(self._n)), [], size
                            )
                        )
                    )
                )
            self._best_empty[size] = best
        return self._best_empty[size]

    def describe(self, chosen: Iterable[int], available_count: int) -> AllocationDecision:
        """What the metric and the log line need of `chosen` (an answer of allocate() among
        `available_count` GPUs): its ring, the best ring of its size on an empty node, whether it
        reaches it, its NICs."""
        members = _indices(chosen, "chosen", self._n)
        if not members:
            raise InvalidRequestError("chosen: an empty set is no allocation")
        return self._decision(tuple(members), available_count)

    def _decision(self, chosen: tuple[int, ...], available_count: int) -> AllocationDecision:
        ring = key_ring(self._key(list(chosen)))
        best = self.best_possible_mbps(len(chosen))
        return AllocationDecision(
            chosen=chosen,
            size=len(chosen),
            available_count=available_count,
            ring_bandwidth_gbps=ring / 1000,
            best_possible_gbps=best / 1000,
            optimal=ring >= best,
            exact=self.exact,
            nic_distance=self._nic_distance(chosen),
        )

    def _nic_distance(self, chosen: tuple[int, ...]) -> str | None:
        topology = self._topology
        if not topology.nic_count:
            return None
        nearest = [topology.nearest_nic(g) for g in chosen]
        return max(
            topology.nic_level(g, k) for g, k in zip(chosen, nearest, strict=True) if k is not None
        ).short_name

    def explain(
        self, available: Iterable[int], must_include: Iterable[int], size: int
    ) -> Explanation:
        """The decision, the chosen set's scores, the runner-up and why it lost."""
        avail, must = self._validate(available, must_include, size)
        if self._tables is None:
            chosen = self._choose(avail, must, size)
            decision = self._decision(chosen, len(avail))
            winner = Candidate(chosen, self.score(chosen), None)
            return Explanation(
                decision, winner, None, "bounded search (more than 16 GPUs): no runner-up is ranked"
            )
        tables = self._tables
        avail_mask = _mask(avail)
        top = exact.ranked(tables, avail_mask, _mask(must), size, 2)
        candidates = [
            Candidate(
                _members(m),
                self._set_score(tables.key[m], m),
                FragmentationScore.unpack(exact.fragmentation(tables, avail_mask ^ m)),
            )
            for m in top
        ]
        decision = self._decision(candidates[0].gpus, len(avail))
        if len(candidates) < 2:
            return Explanation(decision, candidates[0], None, "the only candidate")
        return Explanation(
            decision, candidates[0], candidates[1], why_lost(candidates[0], candidates[1])
        )


def _mask(indices: Iterable[int]) -> int:
    mask = 0
    for i in indices:
        mask |= 1 << i
    return mask


def _members(mask: int) -> tuple[int, ...]:
    out = []
    while mask:
        bit = mask & -mask
        out.append(bit.bit_length() - 1)
        mask ^= bit
    return tuple(out)
