"""Rolling-update chaos (issue 42; prints counts, never fails): two or three instances of the DRA driver on one
kubelet directory, a stream of claim calls, instances killed (SIGKILL or SIGTERM) and restarted every 2-8 s
with the same or a new pod UID (testbed/chaos.py says what each step does and which invariants are checked).

Printed per seed: confirmed prepares and unprepares, kills, consistency checks, and the violations: confirmed
prepares lost, confirmed unprepares back, ghost holders, devices confirmed to two claims, rivals a live
instance accepted, slices deleted while an instance served. Target (issue 42): 0 of each over at least 20
seeds of 60 s on a 2-core machine.

Run: .venv/bin/python benchmarks/bench_dra_chaos.py [--seeds 1-20] [--seconds 60] [--instances 2]
"""

from __future__ import annotations

import argparse

import _common  # noqa: F401  (puts the checkout on sys.path)
from _common import table, target_line

from testbed.chaos import run


def _seeds(text: str) -> list[int]:
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(s) for s in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-20")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--instances", type=int, default=2)
    args = parser.parse_args()
    rows, total = [], 0
    for seed in _seeds(args.seeds):
        r = run(seed, args.seconds, args.instances)
        total += r.violations
        rows.append([str(seed), str(r.instances), str(r.prepares_confirmed), str(r.unprepares_confirmed), str(r.kills),
                     str(r.checks), str(len(r.lost)), str(len(r.back)), str(len(r.ghosts)), str(len(r.doubled)),
                     str(len(r.rivals_accepted)), str(r.slices_deleted)])  # fmt: skip
        print(f"seed {seed}: {r.violations} violations {r.lost[:2]}{r.back[:2]}{r.ghosts[:2]}{r.doubled[:2]}"
              f"{r.rivals_accepted[:2]}", flush=True)  # fmt: skip
    headers = ["seed", "instances", "prepared", "unprepared", "kills", "checks", "lost", "back", "ghosts",
               "doubled", "rivals accepted", "slices deleted"]  # fmt: skip
    print(table(headers, rows))
    print(target_line("0 violations over every seed", total == 0))


if __name__ == "__main__":
    main()
