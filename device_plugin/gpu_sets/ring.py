"""ring(S) of one explicit GPU set, outside the precomputed tables (bounded search, ad-hoc scores).

Same definition as the objective's criterion 1: the best, over Hamiltonian cycles of S, of the
slowest hop (|S| = 2: the pair; |S| = 1: 0). Exact for sets of at most EXACT_RING_LIMIT GPUs, by a
threshold-and-path dynamic programme over the subsets of S; above that the slowest pair of S is
returned, a lower bound that equals the ring when S is a clique at that speed.
"""

from __future__ import annotations

EXACT_RING_LIMIT = 12


def _has_cycle(adjacency: list[int], k: int) -> bool:
    """Hamiltonian cycle through all k vertices (k >= 3), paths from vertex 0 by subset DP."""
    full = (1 << k) - 1
    reach = [0] * (1 << k)  # only subsets containing vertex 0 are used
    reach[1] = 1
    for mask in range(3, full + 1, 2):
        ends = 0
        todo = mask ^ 1
        while todo:
            bit = todo & -todo
            todo ^= bit
            if reach[mask ^ bit] & adjacency[bit.bit_length() - 1]:
                ends |= bit
        reach[mask] = ends
    return bool(reach[full] & adjacency[0])


def ring_of_set(bw: tuple[tuple[int, ...], ...], members: list[int]) -> int:
    k = len(members)
    if k < 2:
        return 0
    weights = [bw[a][b] for i, a in enumerate(members) for b in members[i + 1 :]]
    slowest = min(weights)
    if k == 2 or k > EXACT_RING_LIMIT:
        return slowest
    for threshold in sorted({w for w in weights if w > slowest}, reverse=True):
        adjacency = [
            sum(1 << j for j, b in enumerate(members) if b != a and bw[a][b] >= threshold)
            for a in members
        ]
        if _has_cycle(adjacency, k):
            return threshold
    return slowest
