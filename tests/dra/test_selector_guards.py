"""Every CEL selector we ship reads an attribute of our driver only after asking whether it is there.

A device published under our driver name without an attribute that a DeviceClass selector reads makes the
real scheduler fail every claim of that class ("CEL runtime error: no such key", seen on the real v1.36.2
scheduler: tests/real_node/dra/test_published.py). So each `device.attributes["<domain>"].<name>` in a
selector of deploy/ or docs/ must follow a `"<name>" in device.attributes["<domain>"]` guard, and each
selector, evaluated on a device of our driver with no attributes at all, is false, not an error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
_READ = re.compile(r'device\.attributes\["(?P<domain>[^"]+)"\]\.(?P<name>\w+)')


def _selectors(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["cel"]["expression"]] if isinstance(node.get("cel"), dict) else []
        return found + [e for value in node.values() for e in _selectors(value)]
    if isinstance(node, list):
        return [e for value in node for e in _selectors(value)]
    return []


def _shipped() -> list[tuple[str, str]]:
    found = []
    helm = ROOT / "deploy" / "helm"  # Go templates, generated from the manifests scanned here
    for path in sorted(p for p in (ROOT / "deploy").rglob("*.yaml") if not p.is_relative_to(helm)):
        for document in yaml.safe_load_all(path.read_text()):
            found += [(str(path.relative_to(ROOT)), e) for e in _selectors(document)]
    for path in sorted((ROOT / "docs").glob("*.md")):
        for block in re.findall(r"```yaml\n(.*?)```", path.read_text(), flags=re.S):
            for document in yaml.safe_load_all(block):
                found += [(str(path.relative_to(ROOT)), e) for e in _selectors(document)]
    return found


SELECTORS = _shipped()


def test_the_scan_finds_the_shipped_selectors() -> None:
    files = {f for f, _ in SELECTORS}
    assert "deploy/dra/driver/deviceclass.yaml" in files and "deploy/dra/examples/claim-templates.yaml" in files
    assert len(SELECTORS) > 10


@pytest.mark.parametrize(("where", "expression"), SELECTORS, ids=[f"{f}-{i}" for i, (f, _) in enumerate(SELECTORS)])
def test_every_attribute_read_is_guarded_and_a_bare_device_matches_nothing(where: str, expression: str) -> None:
    for read in _READ.finditer(expression):
        guard = f'"{read["name"]}" in device.attributes["{read["domain"]}"]'
        assert guard in expression[: read.start()], f"{where}: {read.group(0)} is read without {guard}"
    domains = {m["domain"] for m in _READ.finditer(expression)} | {"gpu.gpu-device-plugin.io"}
    device = {"driver": "gpu.gpu-device-plugin.io", "attributes": {d: {} for d in domains}, "capacity": {}}
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    result = program.evaluate({"device": celpy.json_to_cel(device)})
    assert result is False or result == celpy.celtypes.BoolType(False), f"{where}: {result!r}"
