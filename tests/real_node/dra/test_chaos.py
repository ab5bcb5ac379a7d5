"""Rolling-update chaos on the real kubelet (issue 42 item 4, short): two driver instances with per-instance
sockets while pods with one-GPU claims come and go, each instance killed (SIGKILL or SIGTERM) and started
again at random moments. Afterwards, with both instances stopped (a consistent read): every claim of a
running pod is in the checkpoint on the device the API server allocated it, no claim of a pod that is gone
stays, and no device is recorded for two claims. The long run is benchmarks/bench_dra_chaos.py (stand-ins)."""

from __future__ import annotations

import json
import random
import signal
import time
from collections.abc import Callable

from device_plugin.dra_helper.checkpoint.store import Checkpoint
from testbed.realnode.cluster import RealCluster
from testbed.realnode.our_daemon import OurDaemon
from testbed.realnode.pods import busybox_pod
from tests.real_node.dra.conftest import DRIVER, EXAMPLES, kubelet_dir

SECONDS = 16.0


def test_kills_during_pod_churn_lose_no_claim_and_leave_no_ghost(
    deployed: RealCluster, dra_driver: Callable[..., OurDaemon]
) -> None:
    rng = random.Random(42)
    instances = [dra_driver("--machine", "dgx1-v100", per_instance=True, holder=f"chaos-{n}") for n in range(2)]
    kubectl = deployed.kubectl
    serial, kills = 0, 0
    deadline = time.monotonic() + SECONDS
    next_kill = time.monotonic() + rng.uniform(3, 6)
    while time.monotonic() < deadline:
        running = [p["metadata"]["name"] for p in kubectl.items("pods", "-n", EXAMPLES)]
        if len(running) < 5 and rng.random() < 0.6:
            serial += 1
            pod = busybox_pod(f"churn-{serial}", EXAMPLES, "sleep 3600", claims={"gpu": "one-gpu"})
            kubectl.create(json.dumps(pod))
        elif running:
            kubectl.delete("pod", "-n", EXAMPLES, rng.choice(running), "--grace-period=0")
        if time.monotonic() >= next_kill:
            victim = rng.randrange(2)
            instances[victim].stop(sig=rng.choice((signal.SIGKILL, signal.SIGTERM)))
            instances[victim].start(wait_ready=False)  # the same pod: a container restart
            kills += 1
            next_kill = time.monotonic() + rng.uniform(3, 6)
        time.sleep(0.5)
    for instance in instances:
        instance.wait_ready(60)

    def settled() -> bool:  # every pod running or gone: the kubelet has retried what failed
        # A pod still being deleted keeps its claim reserved until it is gone, while the kubelet may unprepare
        # the claim at any moment meanwhile: wait until it is gone, or the reads below race that Unprepare.
        pods = kubectl.items("pods", "-n", EXAMPLES)
        return all(
            p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp") for p in pods
        )

    kubectl.wait_for("the pods settled", settled, 120, every_s=1.0)
    # the kubelet's unprepares of the pods deleted last (retried with back-off where a call found no driver)
    kubectl.wait_for(
        "the checkpoint to hold the running pods' claims only",
        lambda: set(_held(deployed)) == set(_in_use(deployed)),
        90,
        every_s=1.0,
    )
    in_use = _in_use(deployed)
    for instance in instances:
        instance.stop()
    held = _held(deployed)  # both stopped: a consistent read
    assert kills >= 2 and serial >= 5
    for uid, devices in in_use.items():
        assert held.get(uid) == devices, f"claim {uid} of a running pod: checkpoint {held.get(uid)}, API {devices}"
    ghosts = set(held) - set(in_use)
    assert not ghosts, f"checkpointed without a pod: {ghosts}"
    recorded = [d for devices in held.values() for d in devices]
    assert len(recorded) == len(set(recorded)), held


def _in_use(cluster: RealCluster) -> dict[str, list[str]]:
    """Claim UID -> the devices the API server allocated it, for claims a pod reserves."""
    claims = cluster.kubectl.items("resourceclaims", "-n", EXAMPLES)
    return {
        c["metadata"]["uid"]: [r["device"] for r in c["status"]["allocation"]["devices"]["results"]]
        for c in claims
        if c.get("status", {}).get("reservedFor")
    }


def _held(cluster: RealCluster) -> dict[str, list[str]]:
    checkpoint = Checkpoint(kubelet_dir(cluster) / "plugins" / DRIVER / "checkpoint.json", shared=True)
    checkpoint.open()
    return {uid: [d.device_name for d in claim.devices] for uid in checkpoint.uids() if (claim := checkpoint.get(uid))}
