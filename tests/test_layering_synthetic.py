"""The layering test's own rules, on synthetic graphs: the direction rule and the cycle rule catch what they
should (tests/test_layering.py applies them to the source)."""

from __future__ import annotations

import pytest

from tests.layering_rules import cycles, direction_violations

# ---- the rules catch what they should (synthetic graphs) ---------------------------------------

TOY_LAYERS = (("top",), ("left", "right"), ("bottom",))


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"top.a": {"left.b"}, "left.b": {"bottom"}, "bottom": set()}, []),
        ({"bottom": {"top.a"}, "top.a": set()}, ["bottom imports top.a: up from layer 2 to layer 0"]),
        ({"left.b": {"right"}, "right": set()}, ["left.b imports right: sideways, left and right share a layer"]),
        ({"left.b": {"left.c"}, "left.c": set()}, []),
    ],
    ids=["downward-is-fine", "upward-fails", "sideways-fails", "inside-a-unit-is-fine"],
)
def test_direction_rule_on_toy_graphs(edges: dict[str, set[str]], expected: list[str]) -> None:
    assert direction_violations(edges, TOY_LAYERS) == expected


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b", "a"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c", "a"]]),
    ],
    ids=["chain-has-no-cycle", "two-module-cycle", "three-module-cycle-reported-as-path"],
)
def test_cycle_rule_on_toy_graphs(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(edges) == expected
