"""What our ResourceSlices cost the real scheduler at cluster scale (issue 47; prints figures, never fails).

A real control plane (testbed/realnode: kube-apiserver, kube-controller-manager, kube-scheduler v1.36 or what
GPU_DEVICE_PLUGIN_KUBE_BIN holds; client rate limits lifted; the node lifecycle controller off, as no kubelet
renews the hand-made nodes' leases) and N hand-made nodes, each with the slice `dra slices` builds for a
dgx1-v100 (8 GPUs). Three styles, alternated over the rounds:
- count-only: the same devices with only the unqualified attributes (what a count-only driver publishes),
  and a plain claim (`exactly`, count k);
- ours, shipped claim: our slices and the example claim of deploy/dra/examples for k GPUs;
- ours, plain claim: our slices and the plain claim (the attributes' own cost);
- with --styles, "..., hints follow use": as ours, with every node's slice written again whenever the GPUs
  its claims hold change, as its driver does (sched_churn.py stands in for the 100-1,000 drivers), which
  adds the slice writes per claim change, those made once nothing changes, and the API server's CPU.
Per style, P pods asking k GPUs are created at once and scheduled (nothing runs them); measured: pods/s
(from the first create to the last binding) and the scheduler's CPU seconds per pod (from /proc, its user
and system time over that window), and the ratio to count-only. Target (issue 47): at most 1.05x the
scheduler CPU per pod of count-only at 500 and 1,000 nodes, sizes 2, 4 and 8, with the shipped claims.

Run: .venv/bin/python benchmarks/bench_scheduler_cost.py [--nodes 100,500,1000] [--sizes 2,4,8] [--pods 200]
     [--rounds 2] [--styles "ours sets, shipped claim;ours none, shipped claim"] (placementHints turned down)
     [--styles "ours, shipped claim;ours, shipped claim, hints follow use"] (the churn, issue 47 item 4)
Needs the Kubernetes binaries and etcd of the real-node tests (docs/real-node.md); no kubelet, no containerd.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (puts the checkout on sys.path)
import yaml
from _common import table, target_line
from sched_churn import HintRepublisher

from device_plugin.dra.inventory import build_devices
from device_plugin.dra_helper.api.slices import build_slices
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from testbed.realnode import binaries
from testbed.realnode.control_plane import ControlPlane
from testbed.realnode.manifests import DEPLOY, EXAMPLES
from testbed.realnode.processes import wait_until
from testbed.realnode.rest import Rest

DRIVER, NS, MACHINE = "gpu.gpu-device-plugin.io", "sched-cost", "dgx1-v100"
CLASS = "gpu.gpu-device-plugin.io"
SHIPPED = {1: "one-gpu", 2: "two-gpus-best-effort", 4: "four-gpus-best-effort", 8: "eight-gpus-best-effort"}
UNQUALIFIED = {"type", "uuid", "index", "minor", "productName", "architecture", "cudaComputeCapability",
               "driverVersion", "cudaDriverVersion", "pcieBusID"}  # fmt: skip
STYLES = ("count-only", "ours, shipped claim", "ours, plain claim")
# the same, with gpuDevicePlugin.placementHints turned down (--styles to measure them)
HINT_STYLES = ("ours sets, shipped claim", "ours none, shipped claim")
# with each node's hints following the GPUs its claims hold (sched_churn.py stands in for the drivers)
CHURN_STYLES = ("ours, shipped claim, hints follow use", "ours, plain claim, hints follow use")
RESOURCE = "/apis/resource.k8s.io/v1"


def _slices_of(style: str) -> str:
    """Which devices a style publishes: count-only, or ours at a placementHints level ("ours sets, ...")."""
    if style == "count-only":
        return "count-only"
    words = style.split(",")[0].split()
    return words[1] if len(words) > 1 else "full"


def _devices(published: str) -> tuple[Any, ...]:
    fake = FakeNvml.from_machine(MACHINE)
    hints = published if published in ("sets", "none") else "full"
    devices, _ = build_devices(fake, build_topology(fake), hints=hints)
    if published != "count-only":
        return devices
    return tuple(replace(d, attributes=tuple(a for a in d.attributes if a[0] in UNQUALIFIED)) for d in devices)


@dataclass(frozen=True)
class Figures:
    pods_per_s: float
    scheduler_cpu_s: float  # a pod
    apiserver_cpu_s: float  # a pod
    writes_per_change: float = 0.0  # hints that follow use only
    idle_writes: int = 0


IDLE_S = 3.0  # how long nothing changes after the last binding, for the writes made meanwhile


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Bench:
    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.rest = Rest(plane, workers=16)
        self.nodes: list[str] = []

    def setup(self) -> None:
        manifests = [DEPLOY / "dra" / "driver" / "deviceclass.yaml"]
        for path in manifests:
            for obj in yaml.safe_load_all(path.read_text()):
                self.rest.call("POST", f"{RESOURCE}/deviceclasses", obj)
        self.rest.call("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        for obj in yaml.safe_load_all((EXAMPLES / "claim-templates.yaml").read_text()):
            obj["metadata"]["namespace"] = NS
            self.rest.call("POST", f"{RESOURCE}/namespaces/{NS}/resourceclaimtemplates", obj)
        for k in (1, 2, 4, 8):
            plain = {"metadata": {"name": f"plain-{k}", "namespace": NS}, "spec": {"spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": k}}
            ]}}}}  # fmt: skip
            self.rest.call("POST", f"{RESOURCE}/namespaces/{NS}/resourceclaimtemplates", plain)
        wait_until(
            "the default service account",
            lambda: bool(self._exists(f"/api/v1/namespaces/{NS}/serviceaccounts/default")),
            60,
        )

    def _exists(self, path: str) -> bool:
        try:
            self.rest.call("GET", path)
            return True
        except Exception:
            return False

    def grow(self, count: int) -> None:
        """Hand-made Ready nodes up to `count`, each with 64 CPUs, no taint."""
        new = [f"node-{n:04d}" for n in range(len(self.nodes), count)]
        self.rest.each(("POST", "/api/v1/nodes", {"metadata": {"name": n}}) for n in new)
        status = {"status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "hand-made"}],
        }}  # fmt: skip
        calls = [("PATCH", f"/api/v1/nodes/{n}/status", status) for n in new]
        with_taints = [("PATCH", f"/api/v1/nodes/{n}", {"spec": {"taints": None}}) for n in new]
        for batch in (calls, with_taints):
            self._patch_all(batch)
        self.nodes += new

    def _patch_all(self, calls: list[tuple[str, str, Any]]) -> None:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda c: self.rest.merge_patch(c[1], c[2]), calls))

    def republisher(self, published: str) -> HintRepublisher:
        """A stand-in for every node's driver, republishing the hints that follow use (sched_churn.py)."""
        return HintRepublisher(self.rest, MACHINE, DRIVER, NS, _devices(published))

    def publish(self, published: str) -> None:
        self.rest.call("DELETE", f"{RESOURCE}/resourceslices?fieldSelector=spec.driver%3D{DRIVER}")
        wait_until(
            "old slices gone", lambda: not self.rest.call("GET", f"{RESOURCE}/resourceslices?limit=1")["items"], 120
        )
        devices = _devices(published)
        objects = [build_slices(devices, node_name=n, driver_name=DRIVER, generation=1)[0] for n in self.nodes]
        self.rest.each(("POST", f"{RESOURCE}/resourceslices", o) for o in objects)

    def schedule(self, pods: int, size: int, template: str, churn: HintRepublisher | None = None) -> Figures:
        """Pods a second, scheduler and API server CPU seconds a pod, for `pods` pods of `size` GPUs from
        `template`; with `churn`, the slice writes per claim change and those made once all were bound."""
        scheduler = self.plane.scheduler_process().pid
        apiserver = next(p for p in self.plane.processes or [] if p.name == "kube-apiserver").pid
        made = [{
            "metadata": {"name": f"p{n}", "namespace": NS},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
                "containers": [{"name": "c", "image": "none", "resources": {"claims": [{"name": "gpus"}]}}],
            },
        } for n in range(pods)]  # fmt: skip
        if churn is not None:
            churn.start()
        cpu_before, api_before, began = _cpu_s(scheduler), _cpu_s(apiserver), time.monotonic()
        self.rest.each(("POST", f"/api/v1/namespaces/{NS}/pods", p) for p in made)

        def bound() -> bool:
            listed = self.rest.call("GET", f"/api/v1/namespaces/{NS}/pods?fieldSelector=spec.nodeName%3D")
            return not listed["items"]

        wait_until(f"{pods} pods bound", bound, 600)
        took, cpu = time.monotonic() - began, _cpu_s(scheduler) - cpu_before
        api_cpu = _cpu_s(apiserver) - api_before
        per_change, idle = 0.0, 0
        if churn is not None:
            caught_up = churn.settle()  # the last allocations published
            time.sleep(IDLE_S)
            idle = churn.writes - caught_up
            per_change = churn.writes / max(1, churn.claim_changes)
        self.rest.call("DELETE", f"/api/v1/namespaces/{NS}/pods?gracePeriodSeconds=0")
        wait_until(
            "pods gone", lambda: not self.rest.call("GET", f"/api/v1/namespaces/{NS}/pods?limit=1")["items"], 120
        )
        self.rest.call("DELETE", f"{RESOURCE}/namespaces/{NS}/resourceclaims")
        wait_until(
            "claims gone",
            lambda: not self.rest.call("GET", f"{RESOURCE}/namespaces/{NS}/resourceclaims?limit=1")["items"],
            120,
        )
        if churn is not None:
            churn.stop()
        return Figures(pods / took, cpu / pods, api_cpu / pods, per_change, idle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="100,500,1000")
    parser.add_argument("--sizes", default="2,4,8")
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--styles",
        default=";".join(STYLES),
        help=f"';'-separated, of: {'; '.join(STYLES + HINT_STYLES + CHURN_STYLES)}",
    )
    args = parser.parse_args()
    styles = [s.strip() for s in args.styles.split(";")]
    if "count-only" not in styles:
        styles.insert(0, "count-only")  # every ratio is to it
    found = binaries.find_or_say("no real control plane here")
    if found is None:
        return
    plane = ControlPlane(Path(tempfile.mkdtemp(prefix="gdp-sc-", dir="/tmp")), found, "none",
                         controllers="*,-node-lifecycle-controller")  # fmt: skip
    rows, verdicts = [], []
    verdicts_churn: list[bool] = []
    try:
        plane.start()
        bench = Bench(plane)
        bench.setup()
        for nodes in (int(n) for n in args.nodes.split(",")):
            bench.grow(nodes)
            for size in (int(s) for s in args.sizes.split(",")):
                pods = min(args.pods, nodes * (8 // size) // 2)
                figures: dict[str, list[Figures]] = {s: [] for s in styles}
                published = None
                for _ in range(args.rounds):
                    for style in styles:
                        if published != _slices_of(style):
                            published = _slices_of(style)
                            bench.publish(published)
                        template = SHIPPED[size] if "shipped claim" in style else f"plain-{size}"
                        churn = bench.republisher(published) if "follow use" in style else None
                        figures[style].append(bench.schedule(pods, size, template, churn))
                base = sum(f.scheduler_cpu_s for f in figures["count-only"]) / args.rounds
                api_base = sum(f.apiserver_cpu_s for f in figures["count-only"]) / args.rounds
                for style in styles:
                    rate = sum(f.pods_per_s for f in figures[style]) / args.rounds
                    cpu = sum(f.scheduler_cpu_s for f in figures[style]) / args.rounds
                    api = sum(f.apiserver_cpu_s for f in figures[style]) / args.rounds
                    churned = "follow use" in style
                    writes = sum(f.writes_per_change for f in figures[style]) / args.rounds
                    idle = sum(f.idle_writes for f in figures[style])
                    rows.append([str(nodes), str(size), str(pods), style, f"{rate:.1f}", f"{cpu * 1000:.1f}",
                                 f"{cpu / base:.2f}x", f"{api / api_base:.2f}x",
                                 f"{writes:.2f}" if churned else "-", str(idle) if churned else "-"])  # fmt: skip
                    if churned:
                        verdicts_churn.append(writes <= 1.0 and idle == 0)
                    if style == "ours, shipped claim" and nodes >= 500:
                        verdicts.append(cpu / base <= 1.05)
                print(f"{nodes} nodes, {size} GPUs: done", flush=True)
    finally:
        plane.stop()
    headers = ["nodes", "GPUs", "pods", "style", "pods/s", "scheduler ms CPU/pod", "vs count-only",
               "API server CPU vs count-only", "slice writes/claim change", "writes while idle"]  # fmt: skip
    print(table(headers, rows))
    if verdicts_churn:
        met = all(verdicts_churn)
        print(target_line("hints that follow use: at most 1 slice write per claim change, none idle", met))
    if verdicts:
        print(
            target_line("shipped claims at most 1.05x count-only scheduler CPU at 500 and 1,000 nodes", all(verdicts))
        )


if __name__ == "__main__":
    main()
