"""The real daemon as a subprocess: registers with the stand-in, and SIGTERM ends it cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from device_plugin.core.errors import NvmlUnavailableError
from device_plugin.core.names import GPU_RESOURCE
from device_plugin.nvml.backends import open_backend
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn

from .conftest import WAIT_S

REPO = Path(__file__).resolve().parents[2]


def start_daemon(plugin_dir: Path, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CONFIG_FILE", "DEVICE_PLUGIN_DIR")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "device_plugin.cli",
            "run",
            "--device-plugin-dir",
            str(plugin_dir),
            "--metrics-address",
            "127.0.0.1:0",
            *extra,
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_sigterm_exits_zero_removes_socket_and_leaves_other_files(plugin_dir: Path) -> None:
    other = plugin_dir / "kubelet_internal_checkpoint"
    other.write_text("untouched")
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    daemon = start_daemon(plugin_dir, "--machine", "dgx1-v100")
    try:
        connection = kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S + 10)
        assert len(connection.lists[0]) == 8
        daemon.send_signal(signal.SIGTERM)
        output, _ = daemon.communicate(timeout=5)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        kubelet.stop()
    assert daemon.returncode == 0, output
    assert not (plugin_dir / "nvidia-gpu.sock").exists()
    assert other.read_text() == "untouched"
    assert connection.lists[-1] == ()  # the kubelet heard an empty list before the stream ended
    assert "effective config" in output


def test_without_nvml_run_fails_clearly_or_waits_when_told(plugin_dir: Path) -> None:
    try:
        open_backend(None).close()
    except NvmlUnavailableError:
        pass
    else:
        pytest.skip("NVML is available here: the no-GPU behaviour cannot be observed")
    failing = start_daemon(plugin_dir)
    output, _ = failing.communicate(timeout=30)
    assert failing.returncode == 1
    assert "NVML is unavailable" in output

    waiting = start_daemon(plugin_dir, "--fail-on-init-error=false")
    try:
        assert waiting.stdout is not None
        for line in waiting.stdout:
            if "waiting without serving" in line:
                break
        waiting.send_signal(signal.SIGTERM)
        waiting.communicate(timeout=5)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert waiting.returncode == 0
    assert list(plugin_dir.iterdir()) == []


def test_bad_config_exits_2_naming_the_field(plugin_dir: Path) -> None:
    config = plugin_dir / "config.yaml"
    config.write_text("version: v1\nflags:\n  migStrategy: sometimes\n")
    daemon = start_daemon(plugin_dir, "--machine", "single-gpu", "--config", str(config))
    output, _ = daemon.communicate(timeout=30)
    assert daemon.returncode == 2
    assert "flags.migStrategy" in output
