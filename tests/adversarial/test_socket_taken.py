"""Two device plugins on one directory: the one that finds its socket served by another process says so
once, does not take it over, turns /readyz red, and serves again once the path is free.

Issue 21: two `run` processes on one --device-plugin-dir replaced each other's socket every ~150 ms,
13 log lines a second, neither naming the cause; the likeliest real case is NVIDIA's plugin still running.
Real processes, a real kubelet stand-in, real unix sockets.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from device_plugin.core.names import GPU_RESOURCE
from device_plugin.serving.socket_files import served_by_someone
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
WAIT_S = 30.0  # start-up of a subprocess on a loaded machine, plus the longest backoff step (10 s)
CALM_S = 2.5  # how long "does not fight" is watched: the old fight replaced the socket every ~150 ms
TAKEN = "another process serves"
SOCKET = "nvidia-gpu.sock"


class Daemon:
    """`gpu-device-plugin run` on a simulated single-GPU machine; its log collected line by line."""

    def __init__(self, plugin_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("CONFIG_FILE", "DEVICE_PLUGIN_DIR", "PLUGIN_MODE")}
        argv = ["run", "--machine", "single-gpu", "--device-plugin-dir", str(plugin_dir)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "device_plugin.cli", *argv, "--metrics-address", "127.0.0.1:0"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def logged(self, text: str) -> list[str]:
        return [line for line in list(self.lines) if text in line]

    def port(self) -> int:
        found = _wait(lambda: self.logged("HTTP endpoint serving"))
        match = re.search(r":(\d+)$", found[0])
        assert match is not None, found
        return int(match.group(1))

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port()}{path}", timeout=5) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def _wait(condition: Callable[[], T], timeout_s: float = WAIT_S) -> T:
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
    return result


def _inode(path: Path) -> int:
    return path.lstat().st_ino


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gdp-t-", dir="/tmp"))  # short: unix socket paths max 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kubelet(plugin_dir: Path) -> Iterator[KubeletStandIn]:
    standin = KubeletStandIn(plugin_dir)
    standin.start()
    yield standin
    standin.stop()


def _errors(daemon: Daemon) -> list[str]:
    return [line for line in daemon.lines if " ERROR " in line]


def test_a_second_copy_waits_says_so_once_and_takes_over_when_the_first_stops(
    plugin_dir: Path, kubelet: KubeletStandIn
) -> None:
    first = Daemon(plugin_dir)
    second: Daemon | None = None
    try:
        kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
        held = _inode(plugin_dir / SOCKET)
        second = Daemon(plugin_dir)
        _wait(lambda: second.logged(TAKEN))
        status, body = second.get("/readyz")
        assert status == 503 and "served by another process" in body, body
        assert second.get("/healthz")[0] == 200  # alive: a restart would not help
        time.sleep(CALM_S)
        assert _inode(plugin_dir / SOCKET) == held  # nobody replaced the first one's socket
        assert not first.logged("removed or replaced"), first.lines
        (error,) = _errors(second)
        assert "NVIDIA's device plugin" in error and "second copy" in error and str(plugin_dir) in error

        assert first.stop() == 0  # removes its socket: the path is free
        kubelet.wait_for_connection(GPU_RESOURCE, count=2, timeout_s=WAIT_S)
        # The line is written before it serves, but through the log writer thread and our pipe reader: wait.
        _wait(lambda: second.logged("no longer served by another process"))
        _wait(lambda: second.get("/readyz")[0] == 200)
        assert len(_errors(second)) == 1, second.lines
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_a_foreign_process_taking_the_socket_is_not_fought_and_left_when_it_goes(
    plugin_dir: Path, kubelet: KubeletStandIn
) -> None:
    daemon = Daemon(plugin_dir)
    foreign = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
        _wait(lambda: daemon.get("/readyz")[0] == 200)
        foreign.bind(str(plugin_dir / ".foreign"))
        foreign.listen(8)
        os.rename(plugin_dir / ".foreign", plugin_dir / SOCKET)  # as another plugin's bind-and-rename does
        held = _inode(plugin_dir / SOCKET)
        _wait(lambda: daemon.logged(TAKEN))
        assert daemon.get("/readyz")[0] == 503
        time.sleep(CALM_S)
        assert _inode(plugin_dir / SOCKET) == held  # left to its owner
        assert len(_errors(daemon)) == 1, daemon.lines

        foreign.close()
        (plugin_dir / SOCKET).unlink()
        kubelet.wait_for_connection(GPU_RESOURCE, count=2, timeout_s=WAIT_S)
        _wait(lambda: daemon.get("/readyz")[0] == 200)
    finally:
        foreign.close()
        assert daemon.stop() == 0


def _listening(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    return server


def _stale(path: Path) -> socket.socket:
    server = _listening(path)
    server.close()  # the file stays; nobody accepts on it (a process that died)
    return server


def _regular(path: Path) -> None:
    path.write_text("not a socket")


@pytest.mark.parametrize(
    ("make", "served"),
    [(None, False), (_regular, False), (_stale, False), (_listening, True)],
    ids=["missing", "regular-file", "stale-socket-nobody-listens", "listening-socket"],
)
def test_served_by_someone_is_true_only_for_a_socket_a_process_accepts_on(
    plugin_dir: Path, make: Callable[[Path], object] | None, served: bool
) -> None:
    path = plugin_dir / "s.sock"
    made = make(path) if make is not None else None
    try:
        assert served_by_someone(path) is served
    finally:
        if isinstance(made, socket.socket):
            made.close()
