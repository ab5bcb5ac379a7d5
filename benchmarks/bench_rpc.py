"""GetPreferredAllocation over a real unix socket: p50/p99 latency per machine and size. Prints figures.

Usage: .venv/bin/python benchmarks/bench_rpc.py [--requests N] [--seed S] [--machines M,...] [--cold]

The server is the daemon itself, `gpu-device-plugin run --machine M`, in its own process (as on a node:
the kubelet is another process, so client and server do not share a GIL), logging at INFO to a file.
It serves its socket before any kubelet exists, and this client dials that socket directly, sending
one ContainerPreferredAllocationRequest per call with a random available set (shuffled, as the
kubelet sends it) and must_include in a third of the calls. Each GetPreferredAllocation call is
paired with an empty RPC (GetDevicePluginOptions) on the same socket, alternating, so both see the
same machine load. Targets: p99 <= 3 ms (issue 3); GetPreferredAllocation p50 within 1.3x of the
empty RPC's p50 on the 8- and 16-GPU machines (issue 11). Printed, never asserted.

By default a quarter of the calls offer every GPU, as a kubelet does on an idle node, and the policy's
decision cache answers those. `--cold` (issue 17) keeps the cache cold: every call offers a random
proper subset, and no (available, must_include, size) is sent twice, so every call is decided afresh;
the issue's target there is <= 1.25x at every size (`--machines island-16gpu --cold`).
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the checkout on sys.path)
import grpc
from _common import percentile, table

from api import deviceplugin_pb2 as pb
from api import deviceplugin_pb2_grpc as pb_grpc
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml

REPO = Path(__file__).resolve().parent.parent
SOCKET = "nvidia-gpu.sock"
RATIO_TARGET = 1.3
COLD_RATIO_TARGET = 1.25  # issue 17, cache cold on the 16-GPU machine


def _start_daemon(machine: str, plugin_dir: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", machine, "--mig-strategy", "none"]
    command += ["--device-plugin-dir", str(plugin_dir), "--metrics-address", ""]
    log = (plugin_dir / "daemon.log").open("wb")  # a file, not a pipe: a full pipe would stall the daemon
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 30
    while not (plugin_dir / SOCKET).exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"daemon for {machine} did not serve: {(plugin_dir / 'daemon.log').read_text()[-500:]}")
        time.sleep(0.05)
    return process


def bench_machine(machine: str, requests: int, rng: random.Random, *, cold: bool = False) -> list[list[str]]:
    ids = [g.uuid for g in FakeNvml.from_machine(machine).gpus()]
    plugin_dir = Path(tempfile.mkdtemp(prefix="bench-rpc-", dir="/tmp"))
    process = _start_daemon(machine, plugin_dir)
    rows = []
    try:
        with grpc.insecure_channel(f"unix://{plugin_dir / SOCKET}") as channel:
            stub = pb_grpc.DevicePluginStub(channel)
            stub.GetDevicePluginOptions(pb.Empty(), wait_for_ready=True, timeout=30)  # connect before timing
            n = len(ids)
            for size in sorted({1, 2, 4, 8, n // 2} - {0}):
                samples, empty = [], []
                sent: set[tuple[frozenset[str], frozenset[str]]] = set()
                for i in range(requests):
                    while True:
                        count = n if i % 4 == 0 and not cold else rng.randint(size, n - 1 if cold else n)
                        available = rng.sample(ids, count)
                        must = rng.sample(available, min(size, rng.randint(0, 2))) if i % 3 == 0 else []
                        key = (frozenset(available), frozenset(must))
                        if not cold or key not in sent:
                            break
                    sent.add(key)
                    request = pb.PreferredAllocationRequest(
                        container_requests=[
                            pb.ContainerPreferredAllocationRequest(
                                available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
                            )
                        ]
                    )
                    began = time.perf_counter()
                    stub.GetDevicePluginOptions(pb.Empty())
                    empty.append((time.perf_counter() - began) * 1e3)
                    began = time.perf_counter()
                    response = stub.GetPreferredAllocation(request)
                    samples.append((time.perf_counter() - began) * 1e3)
                    assert len(response.container_responses[0].deviceIDs) == size
                p50, empty_p50 = percentile(samples, 50), percentile(empty, 50)
                ratio = p50 / empty_p50
                verdict = "ok" if ratio <= RATIO_TARGET else "over"
                p99 = percentile(samples, 99)
                figures = [f"{p50:.3f}", f"{p99:.2f}", f"{empty_p50:.3f}", f"{ratio:.2f}x"]
                cold_verdict = ["ok" if ratio <= COLD_RATIO_TARGET else "over"] if cold else []
                rows.append([machine, str(size), *figures, *cold_verdict, verdict])
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(plugin_dir, ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="calls per machine and size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--machines", default="", help="comma-separated machine names (default: every shipped one)")
    parser.add_argument("--cold", action="store_true", help="random proper subsets only, none sent twice")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows: list[list[str]] = []
    for machine in args.machines.split(",") if args.machines else shipped_machine_names():
        fake = FakeNvml.from_machine(machine)
        whole_gpus = not any((mode := fake.mig_mode(g.index)) and mode.current for g in fake.gpus())
        if len(fake.gpus()) >= 8 and whole_gpus:  # MIG machines: bench_mig.py
            rows += bench_machine(machine, args.requests, rng, cold=args.cold)
    sets = "random proper subsets, decision cache cold" if args.cold else "a quarter of them with every GPU free"
    print(f"GetPreferredAllocation over a unix socket to the daemon, {args.requests} calls per row ({sets})")
    headers = ["machine", "size", "p50 ms", "p99 ms", "empty p50 ms", "p50 / empty"]
    headers += [f"<= {COLD_RATIO_TARGET}x"] if args.cold else []
    print(table([*headers, f"<= {RATIO_TARGET}x"], rows))
    over = [f"{r[0]} size {r[1]}" for r in rows if r[-1] != "ok"]
    print(
        f"target: GetPreferredAllocation p50 <= {RATIO_TARGET}x the empty RPC's p50 at every size: "
        + ("met" if not over else f"not met for {', '.join(over)}")
    )
    if args.cold:
        over = [f"{r[0]} size {r[1]}" for r in rows if r[-2] != "ok"]
        print(
            f"target (cache cold): p50 <= {COLD_RATIO_TARGET}x the empty RPC's p50 at every size: "
            + ("met" if not over else f"not met for {', '.join(over)}")
        )


if __name__ == "__main__":
    main()
