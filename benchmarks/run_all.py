"""Run every benchmark in turn and print its figures (`make bench`). Asserts nothing; always exits 0.

Each benchmark is its own script (see its docstring for what it measures and the targets it compares
with); this runs them one after the other so one noisy neighbour does not skew two at once. A missed
target is a printed figure ("target ...: missed"), never an exit status: on a busy machine a figure can
miss its target and `make bench` must still finish and show the rest. A benchmark that crashes (exits
non-zero) is reported at the end, and this still exits 0.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = (
    "bench_allocator.py",
    "bench_rpc.py",
    "bench_quality.py",
    "bench_replicas.py",
    "bench_mig.py",
    "bench_health.py",
    "bench_observability.py",
    "bench_dra.py",
    "bench_dra_slow_api.py",
    "bench_dra_republish.py",
    "bench_dra_health.py",
    "bench_dra_start.py",
    "bench_node_runtime.py",
    "bench_rolling_update.py",
    "bench_dra_rolling_update.py",
    "bench_checkpoint.py",
    "bench_config_limits.py",
    "bench_dra_two_instances.py",
    "bench_dra_chaos.py",
    "bench_mps_shares.py",
    # On a real control plane and kubelet (docs/real-node.md): each says why it ran nothing where they are missing.
    "bench_real_scheduler.py",
    "bench_real_rolling_update.py",
    "bench_scheduler_cost.py",
    "bench_share_packing.py",
)


def main(scripts: Sequence[Path] | None = None) -> int:
    crashed = []
    for script in scripts if scripts is not None else [HERE / name for name in BENCHMARKS]:
        print(f"\n==== {script.name} ====", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, str(script)])
        print(f"---- {script.name}: exit {code} in {time.monotonic() - started:.1f} s", flush=True)
        if code != 0:
            crashed.append(f"{script.name} (exit {code})")
    if crashed:
        print(f"\ndid not finish: {', '.join(crashed)}; their figures above are incomplete (this run still exits 0)")
    else:
        print("\nevery benchmark finished; targets are the 'target ...: met/missed' lines above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
