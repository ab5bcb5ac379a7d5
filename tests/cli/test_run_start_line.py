"""`run`'s first log line names the version and the mode, in both modes, before anything can fail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from device_plugin.core.version import package_version

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "device_plugin.cli"]


@pytest.mark.parametrize(
    ("argv", "mode"),
    [
        # Each stops right after the first line: --fake-events without --machine; mode dra without NODE_NAME.
        (["run", "--fake-events", "/nonexistent"], "device-plugin"),
        (["run", "--mode", "dra"], "dra"),
    ],
    ids=["device-plugin", "dra"],
)
def test_the_first_log_line_names_version_and_mode(argv: list[str], mode: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "KUBECONFIG", "CONFIG_FILE", "PLUGIN_MODE")}
    done = subprocess.run([*CLI, *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    first = done.stderr.splitlines()[0]
    assert f"gpu-device-plugin {package_version()}, mode {mode}; effective config (" in first, first
    assert package_version() != "unknown"
