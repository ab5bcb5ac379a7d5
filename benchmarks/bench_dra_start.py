"""How long `gpu-device-plugin run --mode dra` takes from its start to serving (prints figures, never fails).

Each start is a process of its own (as a restarted DaemonSet pod is), against the Kubernetes API stand-in
(read by the real `kubernetes` client through a kubeconfig) and with a DRA kubelet stand-in watching the
registration folder. Timed from the exec: the registration socket served, the pool published (the API
stand-in holds our slices), registered by the kubelet stand-in (which looks every 50 ms, as the kubelet's
plugin watcher reacts to the socket), /readyz 200 (registered and published). Then SIGTERM, and the time
to exit.
Cold: every start imports, reads the simulated machine and builds its tables afresh. No target is named
by an issue; the figures say what a node waits for after a restart or an upgrade.

Run: .venv/bin/python benchmarks/bench_dra_start.py [--starts N] [--machines dgx1-v100,island-16gpu]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from _common import percentile, table

from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.api_standin import ApiStandin
from testbed.dra_process import kubeconfig, torn_down

DRIVER, NODE = DEFAULT_DRA_DRIVER_NAME, "bench-node"
WAIT_S = 60.0  # a bound for a loaded machine, not a figure


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _until(condition: Callable[[], bool], started: float) -> float:
    while not condition():
        if time.monotonic() - started > WAIT_S:
            raise TimeoutError(f"not within {WAIT_S:g} s")
        time.sleep(0.005)
    return time.monotonic() - started


def one_start(machine: str) -> tuple[float, float, float, float, float]:
    """Seconds from exec to: registration socket, pool published, registered, /readyz 200; SIGTERM to exit."""
    root = Path(tempfile.mkdtemp(prefix="bstart-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    port = _free_port()
    env = {**os.environ, "NODE_NAME": NODE, "KUBECONFIG": str(kubeconfig(root / "kubeconfig", api.host))}
    command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", machine, "--mode", "dra"]
    command += ["--device-plugin-dir", str(root / "device-plugins"), "--metrics-address", f"127.0.0.1:{port}"]
    registration = root / "plugins_registry" / f"{DRIVER}-reg.sock"
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    try:
        registered = _until(registration.exists, started)
        published = _until(lambda: bool(api.pool(DRIVER, NODE)), started)
        DraKubeletStandin(registration.parent).wait_for_plugin(timeout_s=WAIT_S)
        kubelet = time.monotonic() - started
        ready = _until(lambda: _ready(port), started)
        stopping = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(WAIT_S)
        return registered, published, kubelet, ready, time.monotonic() - stopping
    finally:
        torn_down(process, api, root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5, help="starts per machine")
    parser.add_argument("--machines", default="dgx1-v100,island-16gpu")
    args = parser.parse_args()
    rows = []
    for machine in args.machines.split(","):
        runs = [one_start(machine) for _ in range(args.starts)]
        columns = list(zip(*runs, strict=True))
        rows.append([machine, *(f"{percentile(list(c), 50):.2f} / {max(c):.2f}" for c in columns)])
    print(f"run --mode dra, {args.starts} cold starts per machine, seconds p50 / max (the kubelet is a stand-in)")
    headers = ["machine", "registration socket", "pool published", "registered", "/readyz 200", "SIGTERM to exit"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
