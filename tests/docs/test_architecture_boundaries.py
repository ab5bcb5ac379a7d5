"""docs/architecture.md's Boundaries table names exactly the third-party packages the layering test allows,
each with the places that test allows it in (so the table cannot drift from the rule it describes)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_layering import THIRD_PARTY

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
ROW = re.compile(r"^\| `([a-z_0-9]+)`[^|]*\| (.+) \|$")


def _table() -> dict[str, str]:
    """Package -> the 'only imported by' cell, for the table's rows that name a package."""
    section = DOC.read_text().split("## Boundaries", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2) for line in section.splitlines() if (m := ROW.match(line))}


def _places(allowed: tuple[str, ...]) -> list[str]:
    """How the table names each allowed place: `nvml/real/`, `dp_helper/`, `api/` ..."""
    names = []
    for place in allowed:
        parts = place.split(".")
        if parts[0] == "device_plugin":
            parts = parts[1:]
        names.append("/".join(parts))
    return names


def test_the_table_lists_every_allowed_package_and_no_other() -> None:
    assert sorted(_table()) == sorted(THIRD_PARTY)


def test_each_row_names_every_place_its_package_may_be_imported() -> None:
    table = _table()
    missing = {
        package: [place for place in _places(allowed) if place not in table[package]]
        for package, allowed in THIRD_PARTY.items()
    }
    assert {p: m for p, m in missing.items() if m} == {}
