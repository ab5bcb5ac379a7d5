"""Benchmarks and the shared test bed import nothing from tests/: what both use lives in testbed/ (tests may
import testbed/; a benchmark run never loads a test module, and a test's refactor never breaks one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.layering_rules import imported_names, module_name

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("benchmarks", "testbed")


def _from_tests(folder: str) -> dict[str, list[str]]:
    found = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        names = sorted({n for n in imported_names(path, module_name(path, ROOT)) if n.split(".")[0] == "tests"})
        if names:
            found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize("folder", FOLDERS)
def test_nothing_is_imported_from_tests(folder: str) -> None:
    assert len(list((ROOT / folder).rglob("*.py"))) > 5
    assert _from_tests(folder) == {}


def test_the_check_sees_an_import_from_tests(tmp_path: Path) -> None:
    (tmp_path / "bench.py").write_text("from tests.dra.api_standin import ApiStandin\n")
    names = set(imported_names(tmp_path / "bench.py", "bench"))
    assert "tests.dra.api_standin" in names
