"""Shared fixtures. `backend`: every NVML contract test runs against each shipped simulated machine and
the real pynvml backend wherever NVML initialises (marker `gpu`; skipped with the reason elsewhere)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from device_plugin.core.errors import NvmlUnavailableError
from device_plugin.nvml.backends import open_backend
from device_plugin.nvml.fake.catalog import shipped_machine_names
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


COUNTED = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Where `make test` asks (GPU_DEVICE_PLUGIN_TEST_SUMMARY names a file), one line for this part of the run,
    so that the run ends with both parts' counts in view, whatever the real-node part printed after the suite."""
    path = os.environ.get("GPU_DEVICE_PLUGIN_TEST_SUMMARY")
    if not path or hasattr(config, "workerinput"):  # an xdist worker: the controller counts them all
        return
    counts = [f"{len(terminalreporter.stats[k])} {k}" for k in COUNTED if terminalreporter.stats.get(k)]
    part = "real node" if any("real_node" in str(a) for a in config.args) else "suite"
    with open(path, "a", encoding="utf-8") as summary:
        summary.write(f"{part}: {', '.join(counts) or 'nothing ran'}\n")
