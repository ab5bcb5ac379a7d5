"""`run` with a broken config exits 2 with one line on stderr, never a traceback or a hang.

Reproduces issue 11 at the process boundary: 1,000-deep nesting gave exit 1 and a RecursionError
traceback, and a FIFO at the config path hung start-up.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from testbed.hostile_yaml import deep_block_mapping

REPO = Path(__file__).resolve().parents[2]


def nested_1000_deep(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(deep_block_mapping(1000))
    return path


def a_fifo(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    os.mkfifo(path)
    return path


def labels_into_the_plugin_dir(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"version: v1\ngpuDevicePlugin:\n  labelsFile: {tmp_path / 'plugins' / 'labels'}\n")
    return path


def event_wait_1e10(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("version: v1\ngpuDevicePlugin:\n  health:\n    eventWaitSeconds: 1.0e+10\n")
    return path


CASES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("nested-1000-deep", nested_1000_deep, "nested deeper than"),
    ("fifo", a_fifo, "FIFO"),
    ("labels-into-the-plugin-dir", labels_into_the_plugin_dir, "gpuDevicePlugin.labelsFile"),
    ("event-wait-1e10", event_wait_1e10, "between 0.01 and 1 seconds"),
]


@pytest.mark.parametrize(("make", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_run_exits_2_with_one_line(tmp_path: Path, make: Callable[[Path], Path], words: str) -> None:
    (tmp_path / "plugins").mkdir()
    config = make(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("CONFIG_FILE", "DEVICE_PLUGIN_DIR", "LABELS_FILE")}
    command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", "dgx1-v100", "--config", str(config)]
    command += ["--device-plugin-dir", str(tmp_path / "plugins"), "--metrics-address", ""]
    # The timeout only turns a hang into a failure.
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and words in lines[0] and len(lines[0]) < 400, done.stderr[-2000:]
