"""No Python module of the shipped code, the tools, the benchmarks or the tests is over 400 lines.

The size of a module is guidance (docs/development.md: aim for 80-250 lines, one job each), not a rule a
module is cut to satisfy: a module is split where its jobs part, never to fit a count. This ceiling only
catches what no single job plausibly needs. api/ is generated gRPC code and is not counted. tests/ is
counted like the code: test tables, stand-ins and helpers included.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("device_plugin", "tools", "benchmarks", "tests")
MAX_LINES = 400


def oversized(paths: Iterable[Path], max_lines: int = MAX_LINES) -> dict[str, int]:
    """The modules among `paths` longer than `max_lines`, with their line counts."""
    counts = {str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p): _lines(p) for p in paths}
    return {name: count for name, count in counts.items() if count > max_lines}


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("folder", CHECKED, ids=[f"{f}-modules-at-most-400-lines" for f in CHECKED])
def test_no_module_over_400_lines(folder: str) -> None:
    modules = sorted((ROOT / folder).rglob("*.py"))
    assert modules, f"{folder}/ has no modules: the check would pass on nothing"
    too_long = oversized(modules)
    assert not too_long, f"split these by responsibility (at most {MAX_LINES} lines): {too_long}"


@pytest.mark.parametrize(
    ("lines", "flagged"),
    [(MAX_LINES, False), (MAX_LINES + 1, True)],
    ids=["400-lines-pass", "401-lines-flagged"],
)
def test_the_check_counts_lines(tmp_path: Path, lines: int, flagged: bool) -> None:
    module = tmp_path / "module.py"
    module.write_text("x = 1\n" * lines, encoding="utf-8")
    assert (str(module) in oversized([module])) is flagged
