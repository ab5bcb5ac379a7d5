"""Two serving instances of the DRA driver and the pool they share (issue 46 item 3; prints only).

A node with 8 GPUs (dgx1-v100) on the Kubernetes API stand-in, rolling-update mode (per-instance sockets).
`--cycles` times, a 1-GPU claim is prepared and unprepared through the DRA kubelet stand-in: first with one
instance serving (both calls to it), then with two, the Prepare at the old one and the Unprepare at the new one
(as calls fall during a surge). Printed for each: slice writes per call (PUT/POST to resourceslices), writes the
API stand-in refused (409 Conflict), how often the stored pool generation went backwards, /readyz failures of
either instance (sampled after every call), and Prepare p50/p99. Target: with two instances at most 5 % of the
writes refused, the generation never backwards, no readiness failure, and one-instance figures no worse.
(Before the pool had one writer, 300 cycles gave 611 writes, 118 refused, the generation backwards 7 times and
32 readiness failures.)

Run: .venv/bin/python benchmarks/bench_dra_two_instances.py [--cycles 150]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from pathlib import Path

from _common import percentile, table, target_line

from device_plugin.nvml.fake.machine import FakeNvml
from testbed.api_standin import ApiStandin
from testbed.dra_node import DRIVER, NODE, Node
from testbed.dra_rolling import GPUS, MACHINE, NEW, OLD, start_instance


def _generation(api: ApiStandin) -> int:
    pool = api.pool(DRIVER, NODE)
    return max((s["spec"]["pool"]["generation"] for s in pool), default=0)


def run(cycles: int, two: bool) -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="bd2i-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    node = Node(root, api, FakeNvml.from_machine(MACHINE))
    node.config_file.write_text("version: v1\ngpuDevicePlugin:\n  mode: dra\n  socketNames: per-instance\n")
    instances = []
    try:
        kubelet = node.kubelet()
        instances.append(start_instance(node, kubelet, OLD))
        old = kubelet.current(DRIVER)
        if two:
            instances.append(start_instance(node, kubelet, NEW))
        new = kubelet.current(DRIVER)
        assert old is not None and new is not None
        time.sleep(1.0)  # the owner noticed; the first writes settle
        mark = len(api.answered)
        backwards = unready = 0
        last = _generation(api)
        took: list[float] = []
        for n in range(cycles):
            claim = node.claim(f"c{n}", f"uid-{n}", GPUS[n % len(GPUS)])
            began = time.perf_counter()
            kubelet.prepare(old, [claim])
            took.append((time.perf_counter() - began) * 1000)
            kubelet.unprepare(new, [claim])
            for runtime in instances:
                unready += not runtime.front_end.readiness().ok
            now = _generation(api)
            backwards += now < last
            last = max(last, now)
        time.sleep(1.0)
        writes = [s for m, p, s in api.answered[mark:] if m in ("PUT", "POST") and "/resourceslices" in p]
        refused = sum(1 for s in writes if s == 409)
        return [
            "two instances" if two else "one instance",
            str(cycles),
            f"{len(writes) / (2 * cycles):.2f}",
            f"{refused} ({100 * refused / max(1, len(writes)):.0f} %)",
            str(backwards),
            str(unready),
            f"{percentile(took, 50):.1f}/{percentile(took, 99):.1f}",
        ]
    finally:
        for runtime in reversed(instances):
            runtime.stop(timeout_s=5.0)
        api.down()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=150)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    one, two = run(args.cycles, two=False), run(args.cycles, two=True)
    headers = [
        "serving",
        "cycles",
        "writes/call",
        "refused",
        "generation back",
        "readiness failures",
        "prepare ms p50/p99",
    ]
    print(table(headers, [one, two]))
    refused = int(two[3].split()[0])
    writes = float(two[2]) * 2 * args.cycles
    print(target_line("two instances: <= 5 % refused, generation never back, no readiness failure",
                      refused <= 0.05 * writes and two[4] == "0" and two[5] == "0"))  # fmt: skip


if __name__ == "__main__":
    main()
