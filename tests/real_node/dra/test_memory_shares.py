"""Shares of one GPU's memory (gpuDevicePlugin.memoryShares) as the real scheduler allocates them and the real
kubelet prepares them: the shipped share template, shares packed onto one GPU by first fit, each Prepare
answering its share, a whole-GPU claim beside them, and the refusal where the setting is off."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from device_plugin.dra_helper.checkpoint.store import Checkpoint
from testbed.fake_mps_control import program, stop_daemons
from testbed.realnode.cluster import RealCluster
from testbed.realnode.manifests import EXAMPLES
from testbed.realnode.our_daemon import OurDaemon
from testbed.realnode.pods import busybox_pod, delete_and_wait, start_running
from tests.real_node.dra.conftest import DRIVER, claim_of, devices, kubelet_dir
from tests.real_node.dra.conftest import EXAMPLES as WHOLE_EXAMPLES

MACHINE = "hgx-h100"  # 81559 MiB a GPU: three 20 GiB shares fit one, a fourth does not
SHARES = EXAMPLES / "memory-shares"
NAMESPACE = "gpu-dra-share-examples"
SHARE = "gpu-memory-20gi"


@pytest.fixture
def share_templates(deployed: RealCluster) -> Iterator[RealCluster]:
    """The shipped share templates (server-side apply); their pods and claims removed afterwards."""
    kubectl = deployed.kubectl
    kubectl.run(
        "apply", "--server-side", "-f", str(SHARES / "namespace.yaml"), "-f", str(SHARES / "claim-templates.yaml")
    )
    yield deployed
    kubectl.run("delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--force", "--wait=true")
    kubectl.run("delete", "resourceclaims", "--all", "-n", NAMESPACE, "--wait=true")


def result_of(claim: dict[str, Any]) -> dict[str, Any]:
    (result,) = [r for r in claim["status"]["allocation"]["devices"]["results"] if r["driver"] == DRIVER]
    return result


def share_pod(cluster: RealCluster, name: str) -> dict[str, Any]:
    pod = start_running(cluster, busybox_pod(name, NAMESPACE, "sleep 3600", claims={"gpu": SHARE}))
    return result_of(claim_of(cluster, pod["metadata"]["name"], NAMESPACE))


def checkpointed(cluster: RealCluster) -> dict[str, Any]:
    """What our driver's checkpoint holds now: claim UID -> its prepared devices (read only)."""
    checkpoint = Checkpoint(kubelet_dir(cluster) / "plugins" / DRIVER / "checkpoint.json")
    return {uid: checkpoint.get(uid) for uid in checkpoint.uids()}


def test_shares_pack_onto_one_gpu_each_prepare_answers_its_share_and_a_whole_claim_gets_another_gpu(
    share_templates: RealCluster, dra_driver: Callable[..., OurDaemon]
) -> None:
    cluster = share_templates
    driver = dra_driver("--machine", MACHINE, "--memory-shares", "true")
    published = devices(cluster)
    first = next(iter(published.values()))
    assert first["allowMultipleAllocations"] is True
    assert first["capacity"]["memory"]["requestPolicy"]["default"] == first["capacity"]["memory"]["value"]
    assert first["attributes"]["gpu-device-plugin.io/memoryIsolation"] == {"string": "none"}

    results = [share_pod(cluster, f"share-{n}") for n in range(4)]
    assert all(r["shareID"] and r["consumedCapacity"]["memory"] == "20Gi" for r in results), results
    assert len({r["shareID"] for r in results}) == 4
    on = [r["device"] for r in results]
    assert on[0] == on[1] == on[2] != on[3], on  # first fit: a fourth 20 GiB does not fit in 81559 MiB

    held = checkpointed(cluster)
    shares = {
        d.share.share_id: (d.device_name, d.share.memory_mib) for c in held.values() for d in c.devices if d.share
    }
    assert shares == {r["shareID"]: (r["device"], 20480) for r in results}
    kubelet_state = (kubelet_dir(cluster) / "dra_manager_state").read_text()
    assert all(r["shareID"] in kubelet_state for r in results)  # the kubelet records each share
    logged = [line for line in driver.log().splitlines() if "NodePrepareResources:" in line]
    assert all(any(f"(share 20480 of 81559 MiB, {r['shareID']})" in line for line in logged) for r in results)

    whole = start_running(cluster, busybox_pod("whole", WHOLE_EXAMPLES, "sleep 3600", claims={"gpu": "one-gpu"}))
    whole_result = result_of(claim_of(cluster, whole["metadata"]["name"]))
    assert whole_result["device"] not in on
    assert (
        whole_result["consumedCapacity"]["memory"] == published[whole_result["device"]]["capacity"]["memory"]["value"]
    )

    delete_and_wait(cluster, NAMESPACE, "share-0")
    cluster.kubectl.wait_for("share-0 unprepared", lambda: results[0]["shareID"] not in _share_ids(cluster), 30)
    assert _share_ids(cluster) >= {r["shareID"] for r in results[1:]}  # the other shares of the GPU stay


def _share_ids(cluster: RealCluster) -> set[str]:
    return {d.share.share_id for c in checkpointed(cluster).values() for d in c.devices if d.share}


def test_a_share_on_a_node_without_memory_shares_is_never_prepared_as_a_whole_gpu(
    share_templates: RealCluster, dra_driver: Callable[..., OurDaemon]
) -> None:
    cluster = share_templates
    driver = dra_driver("--machine", MACHINE)
    assert "allowMultipleAllocations" not in next(iter(devices(cluster).values()))
    cluster.kubectl.create(json.dumps(busybox_pod("share-off", NAMESPACE, "sleep 3600", claims={"gpu": SHARE})))

    def refused() -> str | None:
        events = cluster.kubectl.items("events", "-n", NAMESPACE, "--field-selector=involvedObject.name=share-off")
        messages = " | ".join(e.get("message", "") for e in events)
        return messages if "memoryShares is off" in messages or "cannot allocate" in messages else None

    why = cluster.kubectl.wait_for("the share refused", refused, 60)
    pod = cluster.kubectl.get("pod", "-n", NAMESPACE, "share-off")
    assert pod["status"].get("phase") == "Pending", pod["status"]
    # The real scheduler allocates a device without allowMultipleAllocations whole, capacity request or
    # not; the Prepare is what refuses it.
    assert "request gpu asks for a share (memory 20Gi)" in why and "memoryShares is off" in why, why
    assert "memoryShares is off" in driver.log()


PER_PROCESS = "gpu-memory-20gi-per-process"


def test_per_process_shares_get_one_mps_daemon_per_gpu_and_a_cdi_spec_each_until_unprepared(
    share_templates: RealCluster, dra_driver: Callable[..., OurDaemon]
) -> None:
    """The shipped per-process template (20 GiB, compute 30) as the real scheduler charges it and the real
    kubelet prepares it, run by the project's MPS double (the daemon's lifecycle; it isolates nothing)."""
    cluster = share_templates
    root = Path(tempfile.mkdtemp(prefix="rn-mps-", dir="/tmp"))
    env = {"MPS_CONTROL": program(root), "CDI_SPEC_DIR": str(root / "cdi"), "MPS_ROOT": str(root / "mps")}
    try:
        dra_driver("--machine", MACHINE, "--memory-shares", "true", "--memory-share-isolation", "per-process", env=env)
        first = next(iter(devices(cluster).values()))
        assert first["attributes"]["gpu-device-plugin.io/memoryIsolation"] == {"string": "per-process"}
        policy = first["capacity"]["compute"]["requestPolicy"]
        assert policy == {"default": "0", "validRange": {"min": "0", "step": "1"}}
        results = []
        for n in range(2):
            pod = start_running(cluster, busybox_pod(f"mps-{n}", NAMESPACE, "sleep 3600", claims={"gpu": PER_PROCESS}))
            results.append(result_of(claim_of(cluster, pod["metadata"]["name"], NAMESPACE)))
        assert [(r["consumedCapacity"]["memory"], r["consumedCapacity"]["compute"]) for r in results] == [
            ("20Gi", "30"),
            ("20Gi", "30"),
        ]
        assert results[0]["device"] == results[1]["device"]  # best fit: the second share joins the first's GPU
        shares = [d.share for c in checkpointed(cluster).values() for d in c.devices if d.share]
        assert sorted((s.memory_mib, s.compute_percent) for s in shares) == [(20480, 30), (20480, 30)]
        (pid_file,) = (root / "mps").glob("*/pipe/nvidia-cuda-mps-control.pid")  # one daemon for both shares
        assert len(list((root / "cdi").glob("*.json"))) == 2
        delete_and_wait(cluster, NAMESPACE, "mps-0")
        cluster.kubectl.wait_for("mps-0's spec removed", lambda: len(list((root / "cdi").glob("*.json"))) == 1, 30)
        assert pid_file.exists()  # the other share still uses the daemon
        delete_and_wait(cluster, NAMESPACE, "mps-1")
        cluster.kubectl.wait_for("the daemon stopped after the last share", lambda: not pid_file.exists(), 30)
        assert list((root / "cdi").glob("*.json")) == []
    finally:
        stop_daemons(root)
        shutil.rmtree(root, ignore_errors=True)
