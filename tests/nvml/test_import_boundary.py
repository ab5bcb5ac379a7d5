"""Only device_plugin/nvml/real.py may import pynvml (DESIGN.md: the NVML boundary)."""

from __future__ import annotations

import ast
from pathlib import Path

import device_plugin

ROOT = Path(device_plugin.__file__).resolve().parent.parent
ALLOWED = {Path("device_plugin/nvml/real.py")}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_only_the_real_backend_imports_pynvml() -> None:
    packages = [ROOT / name for name in ("device_plugin", "mig", "timeslice") if (ROOT / name).is_dir()]
    offenders = [
        path.relative_to(ROOT)
        for package in packages
        for path in sorted(package.rglob("*.py"))
        if "pynvml" in imported_modules(path) and path.relative_to(ROOT) not in ALLOWED
    ]
    assert offenders == []


def test_the_real_backend_does_import_it() -> None:
    assert "pynvml" in imported_modules(ROOT / "device_plugin/nvml/real.py")
