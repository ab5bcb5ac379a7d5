"""Only the hardware layer (device_plugin/nvml/) reads sysfs: no "/sys" path literal anywhere else.

Read-only tools (tools/) may name it too: they run on a node, outside the daemon. Everything else gets
PCIe paths, roots and NUMA nodes from the backend, through the Topology.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("device_plugin", "mig", "timeslice")
ALLOWED = (ROOT / "device_plugin" / "nvml",)


def sys_literals(path: Path) -> list[str]:
    """`file:line` of each string literal (f-string parts included) that is, or starts with, /sys."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (node.value == "/sys" or node.value.startswith("/sys/"))
    ]


def test_nothing_outside_the_hardware_layer_names_sysfs() -> None:
    found = [
        hit
        for package in SCANNED
        for path in sorted((ROOT / package).rglob("*.py"))
        if not any(path.is_relative_to(allowed) for allowed in ALLOWED)
        for hit in sys_literals(path)
    ]
    assert found == []


def test_the_scan_sees_the_hardware_layer_reading_sysfs() -> None:
    """The scan can fail: it finds the real backend's own sysfs root."""
    assert sys_literals(ROOT / "device_plugin" / "nvml" / "real" / "backend.py")
