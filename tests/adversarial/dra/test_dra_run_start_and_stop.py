"""`run --mode dra` as a process at its edges: a socket path too long, an API server never reached.

On main 67e3c9c a driverName too long for its kubelet directory (39 characters under a 41-character
microk8s directory; here the first byte past the OS limit) overflowed the unix socket path: a traceback
and exit 1, not a config error. A SIGTERM when the API server had never been reached logged "deleted
the ResourceSlices" although nothing had been published; with an API server answering in 1.5 s the slices
stayed published (a LIST, then one DELETE after another, past the budget).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.serving.socket_files import SUN_PATH_BYTES
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.api_standin import ApiStandin
from testbed.dra_process import kubeconfig

DRIVER, NODE = "gpu.nvidia.com", "node-a"
RUN = [
    sys.executable,
    "-m",
    "device_plugin.cli",
    "run",
    "--machine",
    "single-gpu",
    "--mode",
    "dra",
    "--dra-driver-name",
    DRIVER,
]


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _closed_port() -> int:
    """A port nobody listens on (bound, then released): connections are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(root: Path, host: str) -> dict[str, str]:
    return {**os.environ, "NODE_NAME": NODE, "KUBECONFIG": str(kubeconfig(root / "kubeconfig", host))}


@pytest.mark.parametrize(
    ("driver_chars", "kubelet_dir_chars"),
    [(40, 41), (60, 60), (15, 100)],
    ids=["40-char-name-41-char-dir", "both-long", "long-kubelet-dir"],
)
def test_a_socket_path_too_long_exits_2_naming_driver_name_and_the_kubelet_dir(
    root: Path, driver_chars: int, kubelet_dir_chars: int
) -> None:
    kubelet_dir = root / ("k" * (kubelet_dir_chars - len(str(root)) - 1))
    driver = "g" * (driver_chars - len(".com")) + ".com"
    longest = len(os.fsencode(kubelet_dir / "plugins_registry" / f"{driver}-reg.sock")) + 1
    assert longest > SUN_PATH_BYTES, "the case must overflow the OS limit"
    command = [*RUN, "--device-plugin-dir", str(kubelet_dir / "device-plugins"), "--dra-driver-name", driver]
    done = subprocess.run(
        command, env=_env(root, f"http://127.0.0.1:{_closed_port()}"), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "driverName" in done.stderr and driver in done.stderr and str(kubelet_dir) in done.stderr
    assert not kubelet_dir.exists()  # refused before anything was created


def test_sigterm_when_the_api_server_was_never_reached_says_so_and_exits_0(root: Path) -> None:
    command = [*RUN, "--device-plugin-dir", str(root / "device-plugins"), "--metrics-address", ""]
    process = subprocess.Popen(
        command, env=_env(root, f"http://127.0.0.1:{_closed_port()}"), stderr=subprocess.PIPE, text=True
    )
    try:
        DraKubeletStandin(root / "plugins_registry").wait_for_plugin(timeout_s=30)  # serving
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "during start-up" not in err and "never reached" in err
    assert "deleted the ResourceSlices" not in err
    assert not (root / "plugins_registry" / f"{DRIVER}-reg.sock").exists()


def test_sigterm_with_an_api_server_answering_in_1_5_s_still_deletes_the_slices(root: Path) -> None:
    """Within the graceful budget (under 4 s): the deletes go out at once, together, with the sockets' removal
    (one round trip), not after a LIST and one DELETE after the other."""
    api = ApiStandin().up()
    api.add_node(NODE)
    command = [*RUN, "--device-plugin-dir", str(root / "device-plugins"), "--metrics-address", ""]
    process = subprocess.Popen(command, env=_env(root, api.host), stderr=subprocess.PIPE, text=True)
    try:
        DraKubeletStandin(root / "plugins_registry").wait_for_plugin(timeout_s=30)
        deadline = time.monotonic() + 30
        while not api.pool(DRIVER, NODE) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert api.pool(DRIVER, NODE), "never published"
        time.sleep(0.5)  # the watch's own events are in; nothing is in flight
        api.delay_s = 1.5
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        api.down()
    assert process.returncode == 0, err
    assert api.pool(DRIVER, NODE) == [] and "deleted the ResourceSlices" in err
