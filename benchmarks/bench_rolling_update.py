"""The gap a plugin upgrade leaves on one node (issue 31), today's way against the rolling one (prints, never fails).

A node with 8 GPUs (dgx1-v100) runs plugin A; a thread admits 1-GPU pods one after another through the kubelet
stand-in (each released at once, a 2 ms pause between pods); then B replaces A:
- today's way (DaemonSet maxSurge 0, fixed socket name): A stops (its empty list), then B starts and registers;
- the rolling way (maxSurge 1 / maxUnavailable 0, socket names per instance): B starts beside A, A stops
  once B's /readyz is green.
Printed per way and kubelet generation: the time the node advertised no healthy GPU (exact, from the stand-in's
record of every change of the count) and the pods refused meanwhile, over several rounds. Target: the rolling
way on a kubelet that tracks plugins by socket (PR 135437) leaves no gap: 0 ms and 0 refused pods in every
round. The last row shows why the default stays fixed: per-instance names on an older kubelet leave the node
without GPUs once A leaves (the gap then lasts until the end of the round: nothing recovers by itself).

Run: .venv/bin/python benchmarks/bench_rolling_update.py [--rounds N]
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from _common import percentile, quiet_rounds, table, target_line

from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from testbed.plugin_rolling import Outcome, replace_plugin

WAYS = [  # label, rolling, the kubelet keeps clients by socket (PR 135437)
    ("today's: fixed name, stop then start; kubelet before PR 135437", False, False),
    ("today's: fixed name, stop then start; kubelet with PR 135437", False, True),
    ("rolling: per-instance names, surge; kubelet with PR 135437", True, True),
    ("rolling: per-instance names, surge; kubelet before PR 135437", True, False),
]


def one_round(rolling: bool, clients_by_socket: bool) -> Outcome:
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-b-", dir="/tmp"))  # short: unix socket paths
    kubelet = KubeletStandIn(plugin_dir, clients_by_socket=clients_by_socket)
    kubelet.start()
    try:
        outcome, new = replace_plugin(kubelet, plugin_dir, rolling=rolling)
        new.stop()
        return outcome
    finally:
        kubelet.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)


def main() -> None:
    rounds = quiet_rounds(__doc__)
    rows, target_met = [], True
    for label, rolling, by_socket in WAYS:
        outcomes = [one_round(rolling, by_socket) for _ in range(rounds)]
        gaps = [o.zero_s * 1000 for o in outcomes]
        refused = [len(o.failures) for o in outcomes]
        rows.append(
            [
                label,
                f"{percentile(gaps, 50):.1f}",
                f"{max(gaps):.1f}",
                f"{sum(refused)}",
                f"{sum(o.admitted for o in outcomes)}",
                f"{min(o.healthy_at_end for o in outcomes)}",
            ]
        )
        if rolling and by_socket:
            target_met = max(gaps) == 0.0 and sum(refused) == 0
    print(f"node dgx1-v100 (8 GPUs), {rounds} rounds per way, 1-GPU pods admitted back to back\n")
    headers = ["way", "zero-GPU ms p50", "max", "refused pods", "admitted", "healthy GPUs at end (min)"]
    print(table(headers, rows))
    print()
    print(target_line("rolling way on a kubelet with PR 135437: 0 ms without GPUs, 0 refused pods", target_met))


if __name__ == "__main__":
    main()
