"""The shipped command line on the mock, with no --machine (the real NVML backend), each as its own process started
with the profile's environment: `topology --json`, and `run` serving the kubelet stand-in, showing the
profile's readings on /metrics, taking a lost GPU out and back, and stopping cleanly on SIGTERM."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from device_plugin.core.names import GPU_RESOURCE
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from tests.nvml_mock.conftest import WAIT_S, HostPool, eventually
from tests.nvml_mock.mock_folder import NvmlMock
from tests.nvml_mock.remote import ROOT, write_overrides

pytestmark = pytest.mark.nvml_mock
CLI = [sys.executable, "-m", "device_plugin.cli"]
CONFIG = """version: v1
gpuDevicePlugin:
  health: {quietPeriodSeconds: 0.3, probeIntervalSeconds: 0.1, eventWaitSeconds: 0.05}
"""


def profile_env(mock: NvmlMock, profile: str, workdir: Path) -> dict[str, str]:
    return mock.environment(profile, library_dir=mock.library_dir(workdir / "lib"), overrides=faults_file(workdir))


def faults_file(workdir: Path) -> Path:
    """Not beside config.yaml: `run` watches the config file's folder and rescans on any change there."""
    (workdir / "faults").mkdir(exist_ok=True)
    return workdir / "faults" / "faults.yaml"


def test_topology_prints_the_nvswitch_matrix_of_the_real_gpus(nvml_mock: NvmlMock, tmp_path: Path) -> None:
    env = profile_env(nvml_mock, "h100", tmp_path)
    done = subprocess.run([*CLI, "topology", "--json"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert [gpu["name"] for gpu in shown["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 8
    assert len(shown["pairs"]) == 28
    assert {(p["link"], p["via_nvswitch"], p["bandwidth_gbps"]) for p in shown["pairs"]} == {("NVS18", True, 450.0)}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def metric(port: int, name: str, **labels: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gdp-r-", dir="/tmp"))  # unix socket paths: 107 bytes at most
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_run_serves_the_real_gpus_and_takes_a_lost_one_out_and_back(
    nvml_mock: NvmlMock, mock_hosts: HostPool, tmp_path: Path, plugin_dir: Path
) -> None:
    declared = mock_hosts.profile("h100")
    env = profile_env(nvml_mock, "h100", tmp_path)
    (tmp_path / "config.yaml").write_text(CONFIG)
    port = free_port()
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    command = [*CLI, "run", "--config", str(tmp_path / "config.yaml"), "--device-plugin-dir", str(plugin_dir)]
    command += ["--metrics-address", f"127.0.0.1:{port}"]
    process = subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        connection = kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
        assert {d.id: d.health for d in connection.lists[-1]} == {g.uuid: "Healthy" for g in declared.gpus}
        lost = declared.gpus[3].uuid
        temperature = metric(port, "gpu_device_plugin_gpu_temperature_celsius", uuid=lost)
        assert temperature == declared.temperature_c
        write_overrides(faults_file(tmp_path), {3: {"failure": {"mode": "lost", "xid": {"code": 79}}}})
        eventually(lambda: {d.id: d.health for d in kubelet.latest_devices(GPU_RESOURCE)}[lost] == "Unhealthy", "GPU 3")
        write_overrides(faults_file(tmp_path), {})
        eventually(lambda: {d.id: d.health for d in kubelet.latest_devices(GPU_RESOURCE)}[lost] == "Healthy", "GPU 3")
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert "GPU 3: Healthy -> Unhealthy" in err and "GPU 3: Unhealthy -> Healthy" in err  # each decision logged
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        kubelet.stop()
