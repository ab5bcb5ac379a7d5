"""The layer rules, checked on the source: who may import pynvml, grpc and the generated api."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("device_plugin", "mig", "timeslice")
GRPC_ALLOWED = {
    "device_plugin/kubelet/servicer.py",
    "device_plugin/kubelet/registration.py",
    "device_plugin/kubelet/lifecycle.py",
    "device_plugin/kubelet/standin.py",
    "device_plugin/dra/grpc_service.py",  # the DRA driver's kubelet side
}
PYNVML_ALLOWED = {"device_plugin/nvml/real.py"}
KUBERNETES_ALLOWED_UNDER = "device_plugin/dra/"  # the DRA driver's API side; nothing else talks to the API server


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
            roots.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
            if node.module == "device_plugin" or node.module.startswith("device_plugin."):
                roots.update(f"{node.module}.{alias.name}" for alias in node.names)
                roots.add(node.module)
    return roots


SOURCES = sorted(
    str(p.relative_to(ROOT))
    for package in PACKAGES
    if (ROOT / package).is_dir()
    for p in (ROOT / package).rglob("*.py")
)


@pytest.mark.parametrize("source", SOURCES)
def test_only_the_grpc_layer_imports_grpc_or_api(source: str) -> None:
    roots = imported_roots(ROOT / source)
    if source not in GRPC_ALLOWED:
        assert not roots & {"grpc", "api"}, f"{source} imports grpc/api"


@pytest.mark.parametrize("source", SOURCES)
def test_only_the_real_backend_imports_pynvml(source: str) -> None:
    if source not in PYNVML_ALLOWED:
        assert "pynvml" not in imported_roots(ROOT / source), f"{source} imports pynvml"


@pytest.mark.parametrize("source", SOURCES)
def test_only_the_dra_package_imports_kubernetes(source: str) -> None:
    if not source.startswith(KUBERNETES_ALLOWED_UNDER):
        assert "kubernetes" not in imported_roots(ROOT / source), f"{source} imports kubernetes"


@pytest.mark.parametrize("source", [s for s in SOURCES if s.startswith(("mig/", "timeslice/"))] or ["-"])
def test_mig_and_timeslice_see_value_types_only(source: str) -> None:
    if source == "-":
        pytest.skip("mig/ and timeslice/ have no modules yet")
    roots = imported_roots(ROOT / source)
    # NVML value types (device_plugin.nvml.types, .mig_types) are fine; backends and the protocol are not.
    backends = {f"device_plugin.nvml.{name}" for name in ("real", "fake", "catalog", "protocol")}
    forbidden = {"grpc", "api", "pynvml"} | backends
    assert not roots & forbidden, f"{source} imports {sorted(roots & forbidden)}"


def test_the_rules_see_every_guarded_module() -> None:
    # Guards against a rule that passes because it scanned nothing.
    assert set(GRPC_ALLOWED) <= set(SOURCES)
    assert any(s.startswith("device_plugin/nvml/") for s in SOURCES)
    assert any("kubernetes" in imported_roots(ROOT / s) for s in SOURCES if s.startswith(KUBERNETES_ALLOWED_UNDER))
