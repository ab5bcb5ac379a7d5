"""Shared fixtures. `backend`: every NVML contract test runs against each shipped simulated machine and
the real pynvml backend wherever NVML initialises (marker `gpu`; skipped with the reason elsewhere)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from device_plugin.core.errors import NvmlUnavailableError
from device_plugin.nvml.backends import open_backend
from device_plugin.nvml.catalog import shipped_machine_names
from device_plugin.nvml.protocol import NvmlBackend

BACKENDS = [pytest.param(name, id=f"fake-{name}") for name in shipped_machine_names()]
BACKENDS.append(pytest.param(None, id="real", marks=pytest.mark.gpu))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[NvmlBackend]:
    try:
        opened = open_backend(request.param)
    except NvmlUnavailableError as exc:
        pytest.skip(f"real backend: NVML cannot initialise here (code {exc.code}); run on a GPU node")
    yield opened
    opened.close()
