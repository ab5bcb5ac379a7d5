"""The one connected-components routine and the largest clique, on small graphs with known answers."""

from __future__ import annotations

import pytest

from device_plugin.topology.components import Linked, connected_components, largest_clique_size


def graph(*edges: tuple[int, int]) -> Linked:
    joined = {frozenset(e) for e in edges}
    return lambda a, b: frozenset((a, b)) in joined


CASES = {
    "no GPUs": (0, graph(), (), 0),
    "one GPU": (1, graph(), ((0,),), 1),
    "unlinked GPUs are each their own component": (3, graph(), ((0,), (1,), (2,)), 1),
    "a chain is one component but no triangle": (4, graph((0, 1), (1, 2), (2, 3)), ((0, 1, 2, 3),), 2),
    "components ordered by lowest member whatever the walk": (
        5,
        graph((4, 1), (3, 0)),
        ((0, 3), (1, 4), (2,)),
        2,
    ),
    # DGX-1 hybrid cube mesh: two fully linked quads plus one link from each GPU to the other quad.
    "cube mesh: one component, largest clique 4": (
        8,
        graph(
            *[(a, b) for q in (0, 4) for a in range(q, q + 4) for b in range(a + 1, q + 4)],
            *[(a, a + 4) for a in range(4)],
        ),
        (tuple(range(8)),),
        4,
    ),
}


@pytest.mark.parametrize(("n", "linked", "components", "clique"), CASES.values(), ids=CASES.keys())
def test_components_and_largest_clique(
    n: int, linked: Linked, components: tuple[tuple[int, ...], ...], clique: int
) -> None:
    assert connected_components(n, linked) == components
    assert largest_clique_size(n, linked) == clique
