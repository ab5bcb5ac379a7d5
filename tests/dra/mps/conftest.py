"""The MPS tests' fixtures: the project's double of nvidia-cuda-mps-control, and short folders for it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.fake_mps_control import program, stop_daemons

GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
GPU_B = "GPU-bbbbbbbb-0000-0000-0000-000000000002"


def killed(pid: int) -> None:
    """SIGKILL `pid` and wait until it is dead (delivery is asynchronous)."""
    import os
    import signal
    import time

    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.005)
    raise AssertionError(f"pid {pid} still runs 5 s after SIGKILL")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder under /tmp: a unix socket's path (the daemon's `control`) has at most 107 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="mps-", dir="/tmp"))
    yield folder
    stop_daemons(folder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def mps_program(short_dir: Path) -> str:
    return program(short_dir)
