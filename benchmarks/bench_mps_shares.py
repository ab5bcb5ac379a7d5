"""What per-process isolation costs a share's Prepare, and how long a dead MPS daemon takes to come back.

The whole DRA node (runtime, front-end, the kubelet stand-in over real sockets, the API stand-in) on a
simulated DGX-1, memoryShares on, once with isolation `none` (the baseline: no daemon, no spec) and once
with `per-process`, run by the project's double of nvidia-cuda-mps-control (testbed/fake_mps_control.py:
a Python program, so its start is not the real daemon's). Rows:
- first share on a GPU: the Prepare starts the GPU's daemon and writes the claim's CDI spec; the Unprepare
  after each round stops the daemon again, so every round is a first share (cold);
- a later share: one share holds the GPU (its daemon runs); the Prepare writes the spec only;
- daemon restart: the daemon killed (SIGKILL), the watch's check restarting it (detection is the watch's
  interval, 1 s, on top).
Issue 41 names no target for these; docs/benchmarks.md keeps the figures.

Run: .venv/bin/python benchmarks/bench_mps_shares.py [--rounds N]
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the checkout on sys.path for the package imports below)
from _common import percentile, quiet_rounds, table
from dra_driver import DRIVER, NODE, driver_on, prepare_samples

from device_plugin.standins.api_objects import allocated_claim
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.fake_mps_control import program


def _row(name: str, samples: list[float], errors: int) -> list[str]:
    return [name, f"{percentile(samples, 50):.1f}", f"{percentile(samples, 99):.1f}", str(len(samples)), str(errors)]


def prepare_rows(rounds: int, mps_program: str) -> list[list[str]]:
    label = "per-process (MPS double)" if mps_program else "none (baseline)"
    rows = []
    with driver_on("dgx1-v100", memory_shares=True, mps_program=mps_program) as run:
        kubelet = DraKubeletStandin(run.root / "plugins_registry")
        plugin = kubelet.wait_for_plugin()
        serial = itertools.count()
        samples, errors = prepare_samples(run.api, kubelet, plugin, serial, 1, rounds, share_gib=4)
        rows.append(_row(f"{label}: first share on its GPU", samples, errors))
        held = {"request": "g", "driver": DRIVER, "pool": NODE, "device": "gpu-0", "shareID": "held",
                "consumedCapacity": {"memory": "4Gi"}}  # fmt: skip
        run.api.claims[("ns", "held")] = allocated_claim("ns", "held", "held-0", [held])
        assert not kubelet.prepare(plugin, [("ns", "held-0", "held")])["held-0"].error  # type: ignore[attr-defined]
        samples, errors = prepare_samples(run.api, kubelet, plugin, serial, 1, rounds, share_gib=4)
        rows.append(_row(f"{label}: a later share (daemon running)", samples, errors))
        if mps_program:
            rows.append(restart_row(run, rounds))
        kubelet.unprepare(plugin, [("ns", "held-0", "held")])
    return rows


def restart_row(run: object, rounds: int) -> list[str]:
    mps = run.driver.front_end.decision.mps  # type: ignore[attr-defined]
    uuid = next(iter(mps.daemons.users()))
    mps.daemons.stop()  # the watch thread: this loop calls check() itself, so the figure has no interval in it
    before = len(mps.daemons.restarts_s)
    for _ in range(rounds):
        pid = mps.daemons.daemon(uuid).pid()
        os.kill(pid, signal.SIGKILL)
        while mps.daemons.daemon(uuid).pid() == pid:
            time.sleep(0.001)
        mps.daemons.check()
    samples = [s * 1000 for s in mps.daemons.restarts_s[before:]]
    return _row("per-process (MPS double): daemon restart after SIGKILL", samples, rounds - len(samples))


def main() -> None:
    rounds = quiet_rounds(__doc__, default=40)
    folder = Path(tempfile.mkdtemp(prefix="bmps-", dir="/tmp"))
    rows = prepare_rows(rounds, "") + prepare_rows(rounds, program(folder))
    try:
        print(table(["what (NodePrepareResources round trip, ms)", "p50", "p99", "n", "errors"], rows))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
