"""One statement of maturity (what has been verified on real parts, and what has not), the same in the README
and in every page that speaks of it, and no sentence left in them that says otherwise (issue 44)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "docs/support.md", "docs/dra.md"]
# What earlier releases said and is no longer true: each would contradict the statement.
CONTRADICTIONS = [
    "tested without a cluster",
    "nothing has run against a real",
    "no real api server",
    "no real kubelet",
    "has not run against a real",
    "not against a real kubelet",
    "no real gpu has",
]


def statement(page: str) -> str:
    """The page's `**Maturity.**` paragraph, its lines joined."""
    text = (REPO / page).read_text(encoding="utf-8")
    found = re.findall(r"^\*\*Maturity\.\*\*.*?(?=\n\n)", text, flags=re.DOTALL | re.MULTILINE)
    assert len(found) == 1, f"{page}: {len(found)} maturity statements"
    return " ".join(found[0].split())


@pytest.mark.parametrize("page", PAGES[1:])
def test_the_page_states_maturity_as_the_readme_does(page: str) -> None:
    assert statement(page) == statement("README.md")


def test_the_readme_states_it_near_the_top() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert text.index("**Maturity.**") < text.index("## ")  # before the first section


@pytest.mark.parametrize("page", PAGES)
def test_no_sentence_contradicts_it(page: str) -> None:
    text = " ".join((REPO / page).read_text(encoding="utf-8").lower().split())
    assert [c for c in CONTRADICTIONS if c in text] == []


def test_it_names_both_what_is_verified_and_what_is_not() -> None:
    said = statement("README.md")
    for part in ("kubelet, scheduler and API server", "NVML mock", "H200", "Not verified yet", "MIG", "production"):
        assert part in said
