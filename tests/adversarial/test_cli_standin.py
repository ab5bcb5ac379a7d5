"""`gpu-device-plugin kubelet-standin --dir D` next to a real `run --device-plugin-dir D`: an operator sees
registrations, device lists as health changes, one admission, and a clean stop on SIGINT/SIGTERM."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.cli import main
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn

WAIT_S = 20.0
CLI = [sys.executable, "-m", "device_plugin.cli"]


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gdp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Lines:
    """A child's stdout, line by line, read in a thread so a wait can time out."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(target=lambda: [self._queue.put(line) for line in stdout], daemon=True).start()

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no line with {text!r} within {WAIT_S} s; got:\n{''.join(self.seen)}")


def _stop_all(*processes: subprocess.Popen[str]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)


def _start(argv: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name in ("CONFIG_FILE", "MIG_STRATEGY", "DEVICE_PLUGIN_DIR", "METRICS_ADDRESS"):
        env.pop(name, None)
    return subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_standin_shows_what_a_kubelet_sees_of_run(plugin_dir: Path, stop_signal: signal.Signals) -> None:
    events = plugin_dir.parent / f"{plugin_dir.name}.events"
    events.write_text("", encoding="utf-8")
    machine = ["--machine", "workstation-4gpu", "--fake-events", str(events)]
    daemon = _start(["run", *machine, "--device-plugin-dir", str(plugin_dir), "--metrics-address", ""])
    standin = _start(["kubelet-standin", "--dir", str(plugin_dir), "--allocate", "2"])
    try:
        lines = Lines(standin)
        lines.wait_for("register: nvidia.com/gpu endpoint nvidia-gpu.sock version v1beta1")
        lines.wait_for("nvidia.com/gpu: list 1: 4 devices, 4 healthy")
        lines.wait_for("GetPreferredAllocation -> GPU-")
        assert "NVIDIA_VISIBLE_DEVICES=GPU-" in lines.wait_for("Allocate ->")
        with events.open("a", encoding="utf-8") as handle:
            handle.write('{"gpu": 3, "xid": 79}\n')
        lines.wait_for("3 healthy")
        assert "Healthy -> Unhealthy" in lines.wait_for("Healthy -> Unhealthy")
        standin.send_signal(stop_signal)
        assert standin.wait(timeout=10) == 0
        lines.wait_for("kubelet stand-in stopped")
        assert not (plugin_dir / "kubelet.sock").exists()
    finally:
        _stop_all(standin, daemon)
        events.unlink(missing_ok=True)
    assert daemon.returncode == 0


def test_standin_refuses_a_directory_a_kubelet_serves(plugin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    try:
        assert main(["kubelet-standin", "--dir", str(plugin_dir)]) == 2
    finally:
        kubelet.stop()
    assert "already serves" in capsys.readouterr().out


def test_standin_refuses_a_missing_directory(plugin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kubelet-standin", "--dir", str(plugin_dir / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().out


def test_standin_says_what_it_waits_for_and_why_it_may_never_come(plugin_dir: Path) -> None:
    """docs/running.md's MIG example against a plugin that serves only nvidia.com/gpu (migStrategy none)."""
    daemon = _start(
        ["run", "--machine", "h100-mig-mixed", "--device-plugin-dir", str(plugin_dir), "--metrics-address", ""]
    )
    standin = _start(
        ["kubelet-standin", "--dir", str(plugin_dir), "--allocate", "2", "--resource", "nvidia.com/mig-1g.10gb"]
    )
    try:
        lines = Lines(standin)
        assert "waiting for the first device list of nvidia.com/mig-1g.10gb" in lines.wait_for("--allocate 2:")
        note = lines.wait_for("is not served")
        assert "registered nvidia.com/gpu" in note and "migStrategy mixed" in note
        standin.send_signal(signal.SIGTERM)
        assert standin.wait(timeout=10) == 0
    finally:
        _stop_all(standin, daemon)


def test_standin_waits_quietly_while_a_mixed_plugin_registers_its_resources_one_by_one(plugin_dir: Path) -> None:
    """Issue 32 item 7: with migStrategy mixed the plugin serves the wanted MIG resource, but it registered after
    nvidia.com/gpu, and the stand-in printed "is not served ... it may never come" twice before admitting."""
    daemon = _start(
        [
            "run", "--machine", "h100-mig-mixed", "--mig-strategy", "mixed",
            "--device-plugin-dir", str(plugin_dir), "--metrics-address", "",
        ]
    )  # fmt: skip
    standin = _start(
        ["kubelet-standin", "--dir", str(plugin_dir), "--allocate", "1", "--resource", "nvidia.com/mig-1g.10gb"]
    )
    try:
        lines = Lines(standin)
        lines.wait_for("allocate 1 x nvidia.com/mig-1g.10gb")
        lines.wait_for("Allocate ->")
        assert not [line for line in lines.seen if "is not served" in line], "".join(lines.seen)
        standin.send_signal(signal.SIGTERM)
        assert standin.wait(timeout=10) == 0
    finally:
        _stop_all(standin, daemon)
