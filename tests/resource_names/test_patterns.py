"""`resources` patterns: a glob matched in one pass, agreeing with a reference matcher; bounds refused at load.

Issue 30 item 4: the patterns became `.*` regexes, so 14 stars took 17.7 s a match and 16 stars left the
daemon without a socket. Item 7: a name with a trailing newline passed validation (`re.match` with `$`).
"""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from device_plugin.config.model import parse_config
from device_plugin.config.resource_names import (
    MAX_PATTERN_CHARS,
    MAX_PATTERN_STARS,
    glob_matches,
    parse_resource_naming,
)
from device_plugin.core.errors import ConfigError


def reference_match(pattern: str, text: str) -> bool:
    """Dynamic programming over (pattern position, text position): obviously right, too slow for the daemon."""

    @cache
    def at(p: int, t: int) -> bool:
        if p == len(pattern):
            return t == len(text)
        if pattern[p] == "*":
            return at(p + 1, t) or (t < len(text) and at(p, t + 1))
        return t < len(text) and pattern[p] == text[t] and at(p + 1, t + 1)

    return at(0, 0)


A100 = "NVIDIA A100-SXM4-40GB"
CASES = [
    ("exact", "Tesla T4", "Tesla T4", True),
    ("exact-is-whole-not-prefix", "Tesla T4", "Tesla T40", False),
    ("star-inside", "*A100*", A100, True),
    ("star-matches-empty", "NVIDIA A100-SXM4-40GB*", A100, True),
    ("two-stars-in-order", "*A100*40GB", A100, True),
    ("pieces-out-of-order", "*40GB*A100*", A100, False),
    ("prefix-and-suffix-overlap", "NVIDIA*NVIDIA", "NVIDIA", False),
    ("repeated-piece-needs-the-later-place", "*GB*GB", "1GB-2GB-3GB", True),
    ("case-sensitive", "*a100*", A100, False),
    ("only-stars", "***", "", True),
    ("regex-characters-are-literal", "A1.0*", "A100", False),
    ("many-stars-no-match-answers", "*a" * MAX_PATTERN_STARS, "a" * 40 + "b", False),
]


@pytest.mark.parametrize(("pattern", "text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_glob_matches_as_documented(pattern: str, text: str, expected: bool) -> None:
    assert glob_matches(pattern, text) is expected
    assert reference_match(pattern, text) is expected  # the table itself is right


@given(st.text(alphabet="ab*", max_size=10), st.text(alphabet="ab", max_size=12))
def test_glob_matches_agrees_with_the_reference(pattern: str, text: str) -> None:
    assert glob_matches(pattern, text) == reference_match(pattern, text)


def config_with(pattern: str, name: str = "a100") -> dict[str, object]:
    return {"version": "v1", "resources": {"gpus": [{"pattern": pattern, "name": name}]}}


REFUSED = [
    ("too-many-stars", "*a" * (MAX_PATTERN_STARS + 1), "resources.gpus[0].pattern"),
    ("too-long", "x" * (MAX_PATTERN_CHARS + 1), "resources.gpus[0].pattern"),
    ("empty", "", "resources.gpus[0].pattern"),
    ("trailing-newline-in-pattern", "*A100*\n", "resources.gpus[0].pattern"),
]


@pytest.mark.parametrize(("pattern", "field"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_an_unbounded_pattern_is_refused_naming_the_field(pattern: str, field: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(config_with(pattern))
    assert refused.value.field == field


@pytest.mark.parametrize("name", ["a100\n", "nvidia.com/a100\n", "a100\n\n"], ids=["newline", "prefixed", "two"])
def test_a_name_with_a_trailing_newline_is_refused(name: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(config_with("*A100*", name))
    assert refused.value.field == "resources.gpus[0].name"


def test_a_bounded_pattern_loads_and_matches() -> None:
    naming = parse_resource_naming(parse_config(config_with("*A100*40GB*")).resources)
    assert naming.gpu_name(A100) == "nvidia.com/a100"
    assert naming.gpu_name("Tesla T4") == "nvidia.com/gpu"
