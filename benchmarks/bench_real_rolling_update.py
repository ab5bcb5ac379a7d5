"""Rolling updates judged by the real kubelet (prints figures, never fails): for each mode and socket naming,
what a replacement of our daemon does to GPU pods arriving meanwhile.

One real node (testbed/realnode: kubelet v1.36.2 or what GPU_DEVICE_PLUGIN_KUBE_BIN holds, containerd),
a simulated dgx1-v100. Per round: the old instance serves; `--streams` threads create 1-GPU pods back to
back (device-plugin mode: `nvidia.com/gpu: 1`; DRA: the shipped one-gpu claim) and wait for each to end;
after 3 s the instance is replaced, then the streams go on for 8 s.
- fixed names (`maxSurge 0`): SIGTERM the old instance, start the new one once it has exited;
- per-instance names (`maxSurge 1`): start the new one, wait for its /readyz, then SIGTERM the old one.
Printed per way: pods refused (device-plugin mode: Failed, UnexpectedAdmissionError), pods that failed or
took over 10 s (DRA: the kubelet retries a failed Prepare with back-off), the span of refused pods (first
to last refused pod's creation; 0 when none; the streams sample every ~1 s), and in DRA mode the slice
writes per claim change over the round (each pod's claim is prepared and unprepared: two changes; the
replacement adds its own) and the time the pool listed no device (from the API server's watch).

Run: .venv/bin/python benchmarks/bench_real_rolling_update.py [--rounds 3] [--streams 4] [--ways ...]
Needs what the real-node tests need (docs/real-node.md).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field

import _common  # noqa: F401  (puts the checkout on sys.path)
from _common import percentile, table

from testbed.realnode import binaries
from testbed.realnode.cluster import RealCluster
from testbed.realnode.kubectl import KubectlError
from testbed.realnode.manifests import EXAMPLES_NAMESPACE, apply_dra
from testbed.realnode.our_daemon import OurDaemon, dra_args, dra_env
from testbed.realnode.pods import busybox_pod
from testbed.realnode.slice_writes import SliceWrites

MACHINE = "dgx1-v100"
DRIVER = "gpu.gpu-device-plugin.io"
WAYS = ("device-plugin/fixed", "device-plugin/per-instance", "dra/fixed", "dra/per-instance")
SLOW_S = 10.0
_names = itertools.count()


@dataclass
class Outcome:
    created_s: float
    ended: str  # Succeeded, Failed: <reason>, or timeout
    took_s: float


@dataclass
class Round:
    outcomes: list[Outcome] = field(default_factory=list)
    replaced_at_s: float = 0.0
    slice_writes: int = 0
    no_devices_s: float = 0.0


def _pod_stream(cluster: RealCluster, dra: bool, stop: threading.Event, out: list[Outcome]) -> None:
    kubectl = cluster.kubectl
    namespace = EXAMPLES_NAMESPACE if dra else "default"
    while not stop.is_set():
        name = f"roll-{next(_names)}"
        pod = busybox_pod(
            name, namespace, "true", **({"claims": {"gpu": "one-gpu"}} if dra else {"limits": {"nvidia.com/gpu": 1}})
        )
        began = time.monotonic()
        kubectl.create(json.dumps(pod))
        ended = "timeout"
        while time.monotonic() - began < 60:
            got = kubectl.get("pod", "-n", namespace, name)
            phase = got.get("status", {}).get("phase", "")
            if phase in ("Succeeded", "Failed"):
                ended = phase if phase == "Succeeded" else f"Failed: {got['status'].get('reason', '')}"
                break
            time.sleep(0.2)
        out.append(Outcome(began, ended, time.monotonic() - began))
        with contextlib.suppress(KubectlError):
            kubectl.delete("pod", "-n", namespace, name, "--grace-period=0", "--force")


def _start(cluster: RealCluster, way: str, name: str) -> OurDaemon:
    mode, naming = way.split("/")
    if mode == "dra":
        env = dra_env(cluster, name, per_instance=naming == "per-instance")
        daemon = OurDaemon(cluster, name, dra_args(cluster, "--machine", MACHINE), env)
    else:
        env = {"POD_UID": str(uuid.uuid4()), "SOCKET_NAMES": naming}
        daemon = OurDaemon(cluster, name, ["--machine", MACHINE], env)
    return daemon.start()


def one_round(cluster: RealCluster, way: str, streams: int, number: int) -> Round:
    result = Round()
    dra = way.startswith("dra/")
    old = _start(cluster, way, f"old-{way.replace('/', '-')}-{number}")
    time.sleep(3.0 if not dra else 1.0)  # the kubelet's allocatable / the pool settle
    assert cluster.control_plane is not None
    writes = (
        SliceWrites(cluster.binaries.kubectl, cluster.control_plane.admin_kubeconfig, DRIVER).start() if dra else None
    )
    stop = threading.Event()
    threads = [threading.Thread(target=_pod_stream, args=(cluster, dra, stop, result.outcomes)) for _ in range(streams)]
    for thread in threads:
        thread.start()
    time.sleep(3.0)
    result.replaced_at_s = time.monotonic()
    mark = writes.count() if writes else 0
    new_name = f"new-{way.replace('/', '-')}-{number}"
    if way.endswith("/per-instance"):
        new = _start(cluster, way, new_name)
        old.stop()
    else:
        old.stop()
        new = _start(cluster, way, new_name)
    time.sleep(8.0)
    stop.set()
    for thread in threads:
        thread.join(timeout=90)
    if writes is not None:
        events = writes.since(mark)
        result.slice_writes = len(events)
        gone = [e.at_s for e in events if e.kind == "DELETED"]
        back = [e.at_s for e in events if e.kind == "ADDED"]
        if gone:
            result.no_devices_s = (min(back) if back else time.monotonic()) - min(gone)
        writes.stop()
    new.stop()
    cluster.kubectl.run("delete", "pods", "--all", "-n", EXAMPLES_NAMESPACE if dra else "default", "--grace-period=0",
                        "--force", "--wait=true")  # fmt: skip
    return result


def summary(way: str, rounds: list[Round]) -> list[str]:
    outcomes = [o for r in rounds for o in r.outcomes]
    refused = [o for r in rounds for o in r.outcomes if o.ended.startswith("Failed")]
    slow = [o for o in outcomes if o.ended == "timeout" or o.took_s > SLOW_S]
    spans = []
    for r in rounds:
        times = [o.created_s for o in r.outcomes if o.ended.startswith("Failed")]
        spans.append(max(times) - min(times) if times else 0.0)
    reasons = sorted({o.ended for o in refused})
    return [
        way,
        str(len(outcomes)),
        str(len(refused)),
        str(len(slow)),
        f"{percentile(spans, 50):.1f}",
        f"{percentile([o.took_s for o in outcomes], 50):.1f}/{max(o.took_s for o in outcomes):.1f}",
        f"{sum(r.slice_writes for r in rounds) / max(1, 2 * len(outcomes)):.2f}" if way.startswith("dra") else "-",
        f"{max(r.no_devices_s for r in rounds):.2f}" if way.startswith("dra") else "-",
        "; ".join(reasons)[:60] or "-",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--ways", default=",".join(WAYS))
    args = parser.parse_args()
    found = binaries.find_or_say("no real node here")
    if found is None:
        return
    cluster = RealCluster.create(found).start()
    rows = []
    try:
        apply_dra(cluster)
        version = cluster.node()["status"]["nodeInfo"]["kubeletVersion"]
        for way in args.ways.split(","):
            rounds = [one_round(cluster, way, args.streams, n) for n in range(args.rounds)]
            rows.append(summary(way, rounds))
            print(f"{way}: done", flush=True)
    finally:
        cluster.stop()
    print(f"\nkubelet {version}, containerd; {args.rounds} rounds x {args.streams} pod streams; machine {MACHINE}")
    headers = ["way", "pods", "refused", f"failed/>{SLOW_S:.0f}s", "refused span s (p50)", "pod s p50/max",
               "slice writes/claim change", "no devices s (max)", "refusals"]  # fmt: skip
    print(table(headers, rows))


if __name__ == "__main__":
    main()
