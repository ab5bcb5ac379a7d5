"""tools/mps_limit_check.py (the device check of a share's MPS limit) says plainly when it cannot run: no
MPS control program or nvidia-smi on PATH is exit status 2 and a line saying why, never a pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "mps_limit_check.py"


def test_without_the_mps_program_it_says_it_cannot_run_and_does_not_pass(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # an empty folder: neither program is found
    done = subprocess.run([sys.executable, str(TOOL)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "cannot run here (no nvidia-cuda-mps-control or nvidia-smi on PATH)" in done.stdout
    assert "PASS" not in done.stdout
