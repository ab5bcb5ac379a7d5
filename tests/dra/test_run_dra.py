"""`gpu-device-plugin run --mode dra` as a process: publishes, registers, and cleans up on SIGTERM.

A SIGTERM while serving gets the graceful budget (sockets removed, slices deleted, exit 0); when the API
server stops answering, the stop is cut short and the exit code says so (non-zero).
"""

from __future__ import annotations

import os
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
from collections.abc import Callable
from pathlib import Path

from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.api_standin import ApiStandin
from testbed.dra_process import kubeconfig, torn_down

DRIVER, NODE = DEFAULT_DRA_DRIVER_NAME, "node-a"  # the default driver name


def ready(port: int) -> bytes:
    """The /readyz body once it answers 200 (it may say "not yet" for a moment after the slices appear)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
                return bytes(answer.read())
        except OSError:  # HTTPError (503) is an OSError too
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class HeldApi:
    """A TCP relay in front of the API stand-in; hold() makes it swallow every request from then on (a hung
    API server: connections stay open, nothing is answered), on new and pooled connections alike."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream = upstream_port
        self.holding = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self) -> None:
        self.holding = True

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._upstream))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not self.holding:
                    target.sendall(data)
        except OSError:
            pass


def test_run_mode_dra_publishes_registers_and_deletes_its_slices_on_sigterm() -> None:
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    env = {**os.environ, "NODE_NAME": NODE, "KUBECONFIG": str(kubeconfig(root / "kubeconfig", api.host))}
    command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", "dgx1-v100", "--mode", "dra"]
    with socket.socket() as probe_port:  # a free port for /readyz
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    command += ["--device-plugin-dir", str(root / "device-plugins"), "--metrics-address", f"127.0.0.1:{port}"]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        plugin = DraKubeletStandin(root / "plugins_registry").wait_for_plugin(timeout_s=30)
        assert plugin.endpoint == str(root / "plugins" / DRIVER / "dra.sock")
        deadline = time.monotonic() + 30
        while not api.pool(DRIVER, NODE) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(api.pool(DRIVER, NODE)[0]["spec"]["devices"]) == 8
        assert b"registered; pool generation 1" in ready(port)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert api.pool(DRIVER, NODE) == [] and "deleted the ResourceSlices" in err
        assert not (root / "plugins_registry" / f"{DRIVER}-reg.sock").exists()
        assert not (root / "plugins" / DRIVER / "dra.sock").exists()
        assert "during start-up" not in err and "stopped in" in err
    finally:
        torn_down(process, api, root)
    assert api.invalid == []


def test_run_mode_dra_exits_1_naming_a_metrics_address_it_cannot_bind() -> None:
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    env = {**os.environ, "NODE_NAME": NODE, "KUBECONFIG": str(kubeconfig(root / "kubeconfig", api.host))}
    with socket.socket() as taken:  # held open for the whole run: the driver's bind must fail
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", "single-gpu", "--mode", "dra"]
        command += ["--device-plugin-dir", str(root / "device-plugins"), "--metrics-address", address]
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        finally:
            api.down()
            shutil.rmtree(root, ignore_errors=True)
    assert done.returncode == 1
    assert address in done.stderr and "Traceback" not in done.stderr
    assert api.pool(DRIVER, NODE) == []  # what it published before the refusal is deleted again


def test_sigterm_in_mode_dra_with_a_hung_api_server_is_cut_short_and_exits_non_zero() -> None:
    """Serving, not start-up: the stop gets the graceful budget, removes the sockets, and when the slices
    cannot be deleted within it the exit code tells the cut-short stop apart from a clean one."""
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    relay = HeldApi(api.port)
    env = {**os.environ, "NODE_NAME": NODE, "KUBECONFIG": str(kubeconfig(root / "kubeconfig", relay.host))}
    command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", "dgx1-v100", "--mode", "dra"]
    command += ["--device-plugin-dir", str(root / "device-plugins"), "--metrics-address", ""]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        DraKubeletStandin(root / "plugins_registry").wait_for_plugin(timeout_s=30)
        deadline = time.monotonic() + 30
        while not api.pool(DRIVER, NODE) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(api.pool(DRIVER, NODE)[0]["spec"]["devices"]) == 8
        relay.hold()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert process.returncode != 0, err
        assert "during start-up" not in err and "cut short" in err
        assert not (root / "plugins_registry" / f"{DRIVER}-reg.sock").exists()
        assert not (root / "plugins" / DRIVER / "dra.sock").exists()
    finally:
        relay.close()
        torn_down(process, api, root)


def test_readyz_before_the_kubelet_registers_says_so_in_words() -> None:
    """No kubelet plugin watcher here: /readyz stays 503 and says why (it used to say "...: None")."""
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    env = {**os.environ, "NODE_NAME": NODE, "KUBECONFIG": str(kubeconfig(root / "kubeconfig", api.host))}
    with socket.socket() as probe_port:
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", "single-gpu", "--mode", "dra"]
    command += ["--device-plugin-dir", str(root / "device-plugins"), "--metrics-address", f"127.0.0.1:{port}"]
    process = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    body = ""
    try:
        deadline = time.monotonic() + 30
        while "not registered with the kubelet yet" not in body:
            assert time.monotonic() < deadline, body
            time.sleep(0.05)
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5).close()
                body = "200"  # must not happen: nobody registered us
                break
            except urllib.error.HTTPError as error:
                body = error.read().decode()
            except OSError:  # not listening yet
                continue
        assert "not registered with the kubelet yet" in body and "None" not in body, body
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        api.down()
        shutil.rmtree(root, ignore_errors=True)


def test_run_mode_dra_applies_a_config_file_edit_through_its_file_watch_and_refuses_a_bad_one() -> None:
    """Issue 18 item 12 end to end: the running process notices the edit itself (no call of ours)."""
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    config, labels = root / "config.yaml", root / "features.d" / "gpu"
    labels.parent.mkdir()
    config.write_text("version: v1\ngpuDevicePlugin:\n  mode: dra\n")
    env = {**os.environ, "NODE_NAME": NODE, "KUBECONFIG": str(kubeconfig(root / "kubeconfig", api.host))}
    command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", "dgx1-v100", "--config", str(config)]
    command += ["--device-plugin-dir", str(root / "device-plugins"), "--metrics-address", "127.0.0.1:0"]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr or ()), daemon=True)
    reader.start()

    def wait_for(condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline and process.poll() is None, "".join(lines)
            time.sleep(0.05)

    try:
        DraKubeletStandin(root / "plugins_registry").wait_for_plugin(timeout_s=30)
        wait_for(lambda: bool(api.pool(DRIVER, NODE)))
        config.write_text(f"version: v1\ngpuDevicePlugin:\n  mode: dra\n  labelsFile: {labels}\n")
        wait_for(labels.exists)
        assert "nvidia.com/gpu.count=8" in labels.read_text()
        config.write_text("version: v1\ngpuDevicePlugin:\n  mode: dra\n  rescanIntervalSeconds: -1\n")
        wait_for(lambda: any("invalid, keeping the running config" in line for line in lines))
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        reader.join(10)
        assert any("labels file now" in line for line in lines)
        assert not any("Traceback" in line for line in lines), "".join(lines)
    finally:
        torn_down(process, api, root)
