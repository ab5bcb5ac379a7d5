"""timeslice/ sees value types only: no grpc, api, nvml or other device_plugin modules."""

from __future__ import annotations

import ast
from pathlib import Path

import timeslice

ALLOWED_PROJECT_MODULES = {
    "device_plugin.devices",
    "device_plugin.ids",
    "device_plugin.errors",
    "device_plugin.short_text",  # bounded quoting of config values in error messages
    "device_plugin.allocation_protocols",
    "device_plugin.config.sharing_model",  # the `sharing` section's value types, parsed when the config loads
    "device_plugin.config.sharing",  # that parser (GPU-free); timeslice.config resolves its result per node
}
STDLIB_OK = {"__future__", "collections", "dataclasses", "enum", "logging", "re", "types", "typing"}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_timeslice_imports_only_value_types() -> None:
    package = Path(timeslice.__file__).parent
    offenders = {}
    for path in sorted(package.glob("*.py")):
        bad = {
            m
            for m in imported_modules(path)
            if not m.startswith("timeslice") and m not in ALLOWED_PROJECT_MODULES and m.split(".")[0] not in STDLIB_OK
        }
        if bad:
            offenders[path.name] = sorted(bad)
    assert offenders == {}
