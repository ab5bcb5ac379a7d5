"""A metrics address that cannot be bound ends `run` with exit 1 and says why (no half-alive daemon)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_taken_metrics_port_exits_1_naming_the_address() -> None:
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-bind-", dir="/tmp"))
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    address = f"127.0.0.1:{taken.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if k not in ("CONFIG_FILE", "DEVICE_PLUGIN_DIR", "METRICS_ADDRESS")}
    command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", "single-gpu"]
    command += ["--device-plugin-dir", str(plugin_dir), "--metrics-address", address]
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    finally:
        taken.close()
        leftovers = sorted(p.name for p in plugin_dir.iterdir())
        shutil.rmtree(plugin_dir, ignore_errors=True)
    assert done.returncode == 1, done.stderr
    assert f"cannot listen on {address}" in done.stderr
    assert "Traceback" not in done.stderr
    assert leftovers == []  # nothing was served before the endpoint failed
