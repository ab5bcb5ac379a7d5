"""Run every benchmark in turn and print its figures (`make bench`). Asserts nothing.

Each benchmark is its own script (see its docstring for what it measures and the targets it compares
with); this runs them one after the other so one noisy neighbour does not skew two at once.
"""

from __future__ import annotations

import subprocess
import sys
import time
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
)


def main() -> int:
    failed = []
    for name in BENCHMARKS:
        print(f"\n==== {name} ====", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, str(HERE / name)])
        print(f"---- {name}: exit {code} in {time.monotonic() - started:.1f} s", flush=True)
        if code != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
