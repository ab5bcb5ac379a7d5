"""The hardware boundary in three parts (device_plugin/nvml/): the boundary (the protocol, value types and
the host readers both backends share), real/ (pynvml) and fake/ (the machine description). The boundary
names neither backend (backends.py, which opens one, excepted); neither backend names the other."""

from __future__ import annotations

import pytest

from tests.layering_rules import matches
from tests.test_layering import CODE, SOURCE

NVML, REAL, FAKE = "device_plugin.nvml", "device_plugin.nvml.real", "device_plugin.nvml.fake"
CHOOSER = "device_plugin.nvml.backends"


def _imports(module: str, package: str) -> list[str]:
    return sorted(t for t in SOURCE.edges[module] if matches(t, package))


def test_the_boundary_names_neither_backend() -> None:
    boundary = [m for m in CODE if matches(m, NVML) and not matches(m, REAL) and not matches(m, FAKE)]
    assert len(boundary) >= 10, boundary
    found = {m: _imports(m, REAL) + _imports(m, FAKE) for m in boundary if m != CHOOSER}
    assert {m: t for m, t in found.items() if t} == {}
    assert _imports(CHOOSER, FAKE)  # the rule is exercised: the chooser does name them


@pytest.mark.parametrize(("package", "other"), [(REAL, FAKE), (FAKE, REAL)], ids=["real", "fake"])
def test_neither_backend_names_the_other(package: str, other: str) -> None:
    modules = [m for m in CODE if matches(m, package)]
    assert len(modules) >= 4, modules
    assert {m: _imports(m, other) for m in modules if _imports(m, other)} == {}
    assert any(_imports(m, NVML) for m in modules)  # each is built on the boundary
