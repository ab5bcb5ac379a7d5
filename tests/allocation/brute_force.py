"""An independent, deliberately simple reference for the documented objective (the six criteria of docs/allocation.md).

It enumerates every candidate set and every ring (permutations), with exact fractions, and shares no
code with device_plugin.gpu_sets. Only fit for machines of at most 8 GPUs.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from itertools import combinations, permutations

from device_plugin.topology.model import Topology

FRAG_SIZES = (8, 4, 2)


class BruteForce:
    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        n = topology.gpu_count
        # w(a, b) as docs/allocation.md defines it: the pair's bandwidth in integer MB/s (a model whose link is
        # a fraction of a MB/s, such as the RTX A6000's 14062.5, is rounded per pair, as the allocator does).
        mbps = topology.bandwidth_mbps_matrix()
        self.w = {(a, b): Fraction(mbps[a][b]) for a in range(n) for b in range(n) if a != b}
        self.ring = cache(self._ring)
        self.best_ring = cache(self._best_ring)
        # criterion 4: NICs at PIX or PXB from each GPU, straight from the GPU-NIC matrix
        self.close = (
            [
                {k for k, level in enumerate(topology.nic_levels[g]) if level.short_name in ("PIX", "PXB")}
                for g in range(n)
            ]
            if topology.nic_names
            else [set() for _ in range(n)]
        )
        self.nic = cache(self._nic)

    def _ring(self, members: frozenset[int]) -> Fraction:
        gpus = sorted(members)
        if len(gpus) == 1:
            return Fraction(0)
        if len(gpus) == 2:
            return self.w[gpus[0], gpus[1]]
        best = Fraction(0)
        for rest in permutations(gpus[1:]):
            cycle = (gpus[0], *rest)
            slowest = min(self.w[cycle[i], cycle[(i + 1) % len(cycle)]] for i in range(len(cycle)))
            best = max(best, slowest)
        return best

    def total(self, members: frozenset[int]) -> Fraction:
        return sum((self.w[a, b] for a, b in combinations(sorted(members), 2)), Fraction(0))

    def numa_nodes(self, members: frozenset[int]) -> int:
        return len({self.topology.numa_nodes[g] for g in members})

    def _nic(self, members: frozenset[int]) -> tuple[int, int]:
        """Criterion 4, larger better: (a lone GPU without close NIC, 0) or (close GPUs, largest GPU-NIC matching)."""
        if not self.topology.nic_names:
            return (0, 0)
        if len(members) == 1:
            (gpu,) = members
            return (0 if self.close[gpu] else 1, 0)
        close = sum(1 for g in members if self.close[g])
        return (close, self._matching(sorted(members)))

    def _matching(self, gpus: list[int]) -> int:
        """Largest set of (GPU, NIC) pairs, each GPU and NIC used once, each NIC close to its GPU (Kuhn)."""
        owner: dict[int, int] = {}

        def augment(gpu: int, seen: set[int]) -> bool:
            for nic in sorted(self.close[gpu]):
                if nic not in seen:
                    seen.add(nic)
                    if nic not in owner or augment(owner[nic], seen):
                        owner[nic] = gpu
                        return True
            return False

        return sum(1 for g in gpus if augment(g, set()))

    def _best_ring(self, remaining: frozenset[int], size: int) -> Fraction:
        if len(remaining) < size:
            return Fraction(0)
        return max(self.ring(frozenset(t)) for t in combinations(sorted(remaining), size))

    def partner_sum(self, remaining: frozenset[int]) -> Fraction:
        if len(remaining) < 2:
            return Fraction(0)
        return sum((max(self.w[v, u] for u in remaining if u != v) for v in remaining), Fraction(0))

    def objective(self, chosen: frozenset[int], available: frozenset[int]) -> tuple[object, ...]:
        """Criteria 1-5 as a tuple where larger is better."""
        remaining = available - chosen
        return (
            self.ring(chosen),
            self.total(chosen),
            -self.numa_nodes(chosen),
            *self.nic(chosen),
            *(self.best_ring(remaining, j) for j in FRAG_SIZES),
            self.partner_sum(remaining),
        )

    def best(self, available: set[int], must_include: set[int], size: int) -> tuple[int, ...]:
        avail = frozenset(available)
        candidates = [frozenset(c) for c in combinations(sorted(avail), size) if must_include <= set(c)]
        scored = [(self.objective(c, avail), c) for c in candidates]
        top = max(score for score, _ in scored)
        return min(tuple(sorted(c)) for score, c in scored if score == top)  # criterion 6
