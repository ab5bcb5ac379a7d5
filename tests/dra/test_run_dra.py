"""`gpu-device-plugin run --mode dra` as a process: publishes, registers, and cleans up on SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.dra.api_standin import ApiStandin
from tests.dra.kubelet_dra_standin import DraKubeletStandin

DRIVER, NODE = "gpu.nvidia.com", "node-a"


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: s, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: s, user: u}}]\n"
    )
    return path


def test_run_mode_dra_publishes_registers_and_deletes_its_slices_on_sigterm() -> None:
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    env = {**os.environ, "NODE_NAME": NODE, "KUBECONFIG": str(kubeconfig(root / "kubeconfig", api.host))}
    command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", "dgx1-v100", "--mode", "dra"]
    command += ["--device-plugin-dir", str(root / "device-plugins"), "--metrics-address", ""]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        plugin = DraKubeletStandin(root / "plugins_registry").wait_for_plugin(timeout_s=30)
        assert plugin.endpoint == str(root / "plugins" / DRIVER / "dra.sock")
        deadline = time.monotonic() + 30
        while not api.pool(DRIVER, NODE) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(api.pool(DRIVER, NODE)[0]["spec"]["devices"]) == 8
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert api.pool(DRIVER, NODE) == [] and "deleted the ResourceSlices" in err
        assert not (root / "plugins_registry" / f"{DRIVER}-reg.sock").exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        api.down()
        shutil.rmtree(root, ignore_errors=True)
    assert api.invalid == []
