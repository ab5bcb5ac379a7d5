"""Graph facts over a node's GPUs: connected components and the largest clique, for any pair
predicate.

The one routine for connected components in the project: NVLink domains (pairs with any NVLink) and
the allocator's bandwidth tiers (pairs at or above a speed) both come from `connected_components`,
called once when a Topology is built. Pure functions on GPU indices 0..n-1; no I/O, no topology
types.
"""

from __future__ import annotations

from collections.abc import Callable

Linked = Callable[[int, int], bool]  # (a, b) with a != b -> are they joined? must be symmetric


def connected_components(n: int, linked: Linked) -> tuple[tuple[int, ...], ...]:
    """The components of the graph on 0..n-1 whose edges are the `linked` pairs.

    Each component is ascending, and components are ordered by their lowest member, so the answer is
    the same whatever order the graph is walked in. A GPU linked to nothing is a component of its
    own.
    """
    seen = [False] * n
    components = []
    for start in range(n):
        if seen[start]:
            continue
        seen[start] = True
        members, frontier = [start], [start]
        while frontier:
            a = frontier.pop()
            for b in range(n):
                if not seen[b] and b != a and linked(a, b):
                    seen[b] = True
                    members.append(b)
                    frontier.append(b)
        components.append(tuple(sorted(members)))
    return tuple(components)


def largest_clique_size(n: int, linked: Linked) -> int:
    """Size of the largest set of GPUs that are all pairwise `linked`: 1 with no links, 0 without
    GPUs.

    Bron-Kerbosch with pivoting on bitmasks: exact, and fast on what NVLink fabrics look like
    (cliques joined by few links), which is the only graph it is used on.
    """
    neighbours = [sum(1 << b for b in range(n) if b != a and linked(a, b)) for a in range(n)]
    best = 0

    def extend(size: int, candidates: int, excluded: int) -> None:
        nonlocal best
        if not candidates and not excluded:
            best = max(best, size)
            return
        if size + candidates.bit_count() <= best:
            return  # cannot beat what we have
        pivot_from = candidates | excluded
        pivot = max(_bits(pivot_from), key=lambda v: (neighbours[v] & candidates).bit_count())
        todo = candidates & ~neighbours[pivot]
        while todo:
            bit = todo & -todo
            todo ^= bit
            v = bit.bit_length() - 1
            extend(size + 1, candidates & neighbours[v], excluded & neighbours[v])
            candidates &= ~bit
            excluded |= bit

    extend(0, (1 << n) - 1, 0)
    return best


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        bit = mask & -mask
        out.append(bit.bit_length() - 1)
        mask ^= bit
    return out
