"""The gap a DRA driver upgrade leaves on one node (issue 31), today's way against the rolling one (prints only).

A node with 8 GPUs (dgx1-v100) runs the driver against the Kubernetes API stand-in; a thread playing the kubelet
1.33+ prepares a 1-GPU claim and unprepares it, one after another, each call sent to the most recently
registered instance (testbed/dra_rolling.py); then a new instance replaces the old one:
- today's way (DaemonSet maxSurge 0, `socketNames: fixed`): the old instance stops, deleting the pool's slices,
  then the new one starts, publishes and registers;
- the rolling way (maxSurge 1 / maxUnavailable 0, `socketNames: per-instance`): the new instance starts beside
  the old one, which stops once the new one is ready and leaves the slices to it.
Printed per way: the time the pool listed no device (from a record taken at every slice change the API stand-in
stores), the calls that failed meanwhile (the kubelet retries them; a pod waits), the slice deletions, over
several rounds. Target: the rolling way leaves no gap: 0 ms, 0 failed calls and 0 deleted slices in every round.

Run: .venv/bin/python benchmarks/bench_dra_rolling_update.py [--rounds N]
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from _common import percentile, quiet_rounds, table, target_line

from device_plugin.nvml.fake.machine import FakeNvml
from testbed.api_standin import ApiStandin
from testbed.dra_node import NODE, Node
from testbed.dra_rolling import MACHINE, Outcome, replace_driver

WAYS = [("today's: fixed names, stop then start", False), ("rolling: per-instance names, surge", True)]


def one_round(rolling: bool) -> Outcome:
    root = Path(tempfile.mkdtemp(prefix="bdru-", dir="/tmp"))  # short: unix socket paths
    api = ApiStandin().up()
    api.add_node(NODE)
    try:
        outcome, new = replace_driver(Node(root, api, FakeNvml.from_machine(MACHINE)), rolling=rolling)
        new.stop()
        return outcome
    finally:
        api.down()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    rounds = quiet_rounds(__doc__)
    rows, target_met = [], True
    for label, rolling in WAYS:
        outcomes = [one_round(rolling) for _ in range(rounds)]
        gaps = [o.zero_s * 1000 for o in outcomes]
        failed = sum(len(o.failures) for o in outcomes)
        deletes = sum(o.slice_deletes for o in outcomes)
        rows.append(
            [
                label,
                f"{percentile(gaps, 50):.1f}",
                f"{max(gaps):.1f}",
                f"{failed}",
                f"{sum(o.prepared for o in outcomes)}",
                f"{deletes}",
                f"{min(o.listed_at_end for o in outcomes)}",
            ]
        )
        if rolling:
            target_met = max(gaps) == 0.0 and failed == 0 and deletes == 0
    print(f"node {MACHINE} (8 GPUs), {rounds} rounds per way, 1-GPU claims prepared and unprepared back to back\n")
    headers = ["way", "no-device ms p50", "max", "failed calls", "prepared", "slice deletes", "listed at end (min)"]
    print(table(headers, rows))
    print()
    print(target_line("rolling way: 0 ms without devices, 0 failed calls, 0 slice deletions", target_met))


if __name__ == "__main__":
    main()
