"""Every logger of ours is named by its module path (getLogger(__name__)), so a log line's logger name says
which file wrote it and `--log-level`/caplog filters by package work. A name written by hand drifts when a
module moves (a split left "device_plugin.node.daemon" behind after daemon.py was gone)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("device_plugin",)


def _hand_named_loggers(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "getLogger"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and node.args[0].value.split(".")[0] in OURS
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} getLogger({node.args[0].value!r})")
    return found


@pytest.mark.parametrize("package", OURS)
def test_our_loggers_are_named_by_their_module(package: str) -> None:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules, package
    assert [hit for path in modules for hit in _hand_named_loggers(path)] == []
