"""The real scheduler as the judge of our placement hints (prints figures, never fails).

One real node (testbed/realnode) runs our DRA driver on a simulated 8-GPU machine. A seeded trace of 1-, 2-,
4- and 8-GPU claims arriving and leaving (benchmarks/dra_first_fit.py's `trace`, the model bench_dra.py (c)
replays) is played with real pods and the shipped example claims (one-gpu, two-gpus-best-effort,
four-gpus-best-effort, eight-gpus-best-effort): each claim stays held while its pod runs; a departure
deletes the pod and waits for the kubelet's Unprepare. Before each arrival the pool's writes settle (the
hints that follow the GPUs in use have landed). An arrival larger than the free GPUs is skipped (counted).
Printed per machine and seed: for each size, the claims the real scheduler placed on a set optimal among
the GPUs free at that moment (testbed/placement_quality.py) out of those placed; claims not placed; and the
ResourceSlice writes per claim change (target: at most 1). Target (issue 40): 100 % for every size on every
machine and seed.

Run: .venv/bin/python benchmarks/bench_real_scheduler.py [--machines dgx1-v100,...] [--seeds 1,2,3] [--claims 24]
Needs what the real-node tests need (docs/real-node.md). About 1-2 minutes per machine and seed.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field

import _common  # noqa: F401  (puts the checkout on sys.path)
from _common import table, target_line
from dra_first_fit import SIZES, trace

from device_plugin.gpu_sets import Allocator
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from testbed.placement_quality import optimal
from testbed.realnode import binaries
from testbed.realnode.cluster import RealCluster
from testbed.realnode.manifests import EXAMPLES_NAMESPACE as NS
from testbed.realnode.manifests import apply_dra
from testbed.realnode.our_daemon import OurDaemon, dra_args, dra_env
from testbed.realnode.pods import busybox_pod
from testbed.realnode.slice_writes import SliceWrites

DRIVER = "gpu.gpu-device-plugin.io"
TEMPLATES = {1: "one-gpu", 2: "two-gpus-best-effort", 4: "four-gpus-best-effort", 8: "eight-gpus-best-effort"}
MACHINES = ("dgx1-v100", "pcie-8gpu-2socket", "hgx-h100")
PLACE_TIMEOUT_S = 30.0


@dataclass
class Replay:
    optimal: dict[int, list[int]] = field(default_factory=lambda: {s: [0, 0] for s in SIZES})
    unplaced: int = 0
    skipped: int = 0
    changes: int = 0
    writes: int = 0


def _running_claim(cluster: RealCluster, pod: str) -> list[str] | None:
    got = cluster.kubectl.get("pod", "-n", NS, pod)
    if got.get("status", {}).get("phase") != "Running":
        return None
    name = got["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = cluster.kubectl.get("resourceclaim", "-n", NS, name)
    results = claim["status"]["allocation"]["devices"]["results"]
    return [r["device"] for r in results if r["driver"] == DRIVER]


def replay(cluster: RealCluster, machine: str, seed: int, claims: int) -> Replay:
    fake = FakeNvml.from_machine(machine)
    allocator = Allocator(build_topology(fake))
    index_of = {g.uuid: g.index for g in fake.gpus()}
    gpus = len(index_of)
    driver = OurDaemon(cluster, f"sched-{machine}-{seed}", dra_args(cluster, "--machine", machine),
                       dra_env(cluster, f"sched-{machine}-{seed}")).start()  # fmt: skip
    assert cluster.control_plane is not None
    writes = SliceWrites(cluster.binaries.kubectl, cluster.control_plane.admin_kubeconfig, DRIVER).start()
    result = Replay()
    held: dict[str, set[int]] = {}  # pod -> GPU indices
    order: list[str] = []
    try:
        device_index = _device_indices(cluster, index_of)
        for serial, (kind, value) in enumerate(trace(seed, claims)):
            writes.settle(quiet_s=1.5)
            if kind == "-":
                if order:
                    pod = order.pop(value % len(order))
                    released = driver.log().count(" released in ")
                    cluster.kubectl.run("delete", "pod", "-n", NS, pod, "--grace-period=0", "--force")
                    cluster.kubectl.wait_for(
                        "the Unprepare", lambda r=released: driver.log().count(" released in ") > r, 60
                    )
                    held.pop(pod)
                    result.changes += 1
                continue
            free = set(range(gpus)) - {g for s in held.values() for g in s}
            if value > len(free):
                result.skipped += 1
                continue
            pod = f"c{serial}"
            cluster.kubectl.create(json.dumps(busybox_pod(pod, NS, "sleep 36000", claims={"gpus": TEMPLATES[value]})))
            try:
                names = cluster.kubectl.wait_for(
                    f"{pod} running", lambda p=pod: _running_claim(cluster, p), PLACE_TIMEOUT_S
                )
            except TimeoutError:
                result.unplaced += 1
                cluster.kubectl.run("delete", "pod", "-n", NS, pod, "--grace-period=0", "--force")
                continue
            got = {device_index[n] for n in names}
            held[pod] = got
            order.append(pod)
            result.changes += 1
            result.optimal[value][1] += 1
            result.optimal[value][0] += optimal(allocator, free, got)
        writes.settle(quiet_s=1.5)
        result.writes = writes.count()
    finally:
        writes.stop()
        cluster.kubectl.run("delete", "pods", "--all", "-n", NS, "--grace-period=0", "--force", "--wait=true")
        time.sleep(2)
        driver.stop()
    return result


def _device_indices(cluster: RealCluster, index_of: dict[str, int]) -> dict[str, int]:
    found = cluster.kubectl.items("resourceslices", f"--field-selector=spec.driver={DRIVER}")
    return {d["name"]: index_of[d["attributes"]["uuid"]["string"]] for s in found for d in s["spec"]["devices"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", default=",".join(MACHINES))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--claims", type=int, default=24)
    args = parser.parse_args()
    found = binaries.find_or_say("no real node here")
    if found is None:
        return
    cluster = RealCluster.create(found).start()
    rows, verdicts = [], []
    try:
        apply_dra(cluster)
        for machine in args.machines.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                r = replay(cluster, machine, seed, args.claims)
                shares = [f"{r.optimal[s][0]}/{r.optimal[s][1]}" for s in SIZES]
                per_change = r.writes / r.changes if r.changes else 0.0
                rows.append([machine, str(seed), *shares, str(r.unplaced), str(r.skipped), f"{per_change:.2f}"])
                met = all(r.optimal[s][0] == r.optimal[s][1] for s in SIZES) and r.unplaced == 0
                verdicts.append((met, per_change <= 1.0))
                print(f"{machine} seed {seed}: done", flush=True)
    finally:
        cluster.stop()
    headers = ["machine", "seed", *(f"{s}-GPU optimal" for s in SIZES), "unplaced", "skipped", "writes/change"]
    print(table(headers, rows))
    print(target_line("100 % optimal among the free GPUs for every size, none unplaced", all(v[0] for v in verdicts)))
    print(target_line("at most 1 slice write per claim change", all(v[1] for v in verdicts)))


if __name__ == "__main__":
    main()
