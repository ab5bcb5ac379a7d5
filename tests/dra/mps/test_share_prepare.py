"""Per-process isolation end to end over real unix sockets (the kubelet stand-in, the Preparer, the MPS
double): a share's Prepare starts its GPU's daemon and writes its CDI spec, its Unprepare takes them down,
a restarted driver adopts them, and what cannot be set up is refused with nothing left behind."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from device_plugin.dra.memory_shares import shareable_memory
from device_plugin.dra.mps.gpu_daemons import GpuDaemons
from device_plugin.dra.mps.share_setup import MpsShareSetup
from device_plugin.dra.prepare_decision import PrepareDecision
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from testbed.fake_mps_control import program
from tests.dra.mps.conftest import killed
from tests.dra.test_kubelet_side import DGX1, DRIVER, NODE, ClaimStore, Driver, kubelet
from tests.dra.test_memory_shares import allocated, devices_of, share_result

OWN = "gpu-device-plugin.io"
GPU0 = DGX1["gpu-0"]


def mps_driver(root: Path, mps_program: str) -> Driver:
    setup = MpsShareSetup(GpuDaemons(mps_program, root / "mps", timeout_s=5.0), root / "cdi", OWN)
    decision = PrepareDecision(driver_name=DRIVER, pool_name=NODE, mps=setup)
    decision.see(DGX1, frozenset(), shareable_memory(devices_of("dgx1-v100", True)))
    return Driver(root, ClaimStore(), decision)


@pytest.fixture
def node() -> Iterator[Driver]:
    root = Path(tempfile.mkdtemp(prefix="mpsn-", dir="/tmp"))
    d = mps_driver(root, program(root))
    d.start()
    yield d
    d.stop()
    for uuid in list(d.decision.mps.daemons.users()) if d.decision.mps else ():
        d.decision.mps.daemons.daemon(uuid).stop()
    shutil.rmtree(root, ignore_errors=True)


def daemons(node: Driver) -> GpuDaemons:
    assert node.decision.mps is not None
    return node.decision.mps.daemons


def spec_of(node: Driver, uid: str) -> dict[str, Any]:
    return json.loads((node.root / "cdi" / f"{OWN}-mps-{uid}.json").read_text())


def share(device: str, share_id: str, memory: str, compute: str | None = None) -> dict[str, Any]:
    result = share_result(device, share_id, memory)
    if compute is not None:
        result["consumedCapacity"]["compute"] = compute
    return result


def test_two_shares_of_one_gpu_get_one_daemon_and_a_cdi_device_each_with_their_limits(node: Driver) -> None:
    k = kubelet(node)
    plugin = k.wait_for_plugin()
    node.store.claims[("ns", "a")] = allocated("a", "uid-a", [share("gpu-0", "s-a", "8Gi")])
    node.store.claims[("ns", "b")] = allocated("b", "uid-b", [share("gpu-0", "s-b", "12Gi", "30")])
    answers = k.prepare(plugin, [("ns", "uid-a", "a"), ("ns", "uid-b", "b")])
    assert {u: (a.error, list(a.devices[0].cdi_device_ids)) for u, a in answers.items()} == {
        "uid-a": ("", [f"nvidia.com/gpu={GPU0}", f"{OWN}/mps=uid-a-0"]),
        "uid-b": ("", [f"nvidia.com/gpu={GPU0}", f"{OWN}/mps=uid-b-0"]),
    }
    pipe = str(daemons(node).folders(GPU0).pipe_dir)
    assert spec_of(node, "uid-b") == {
        "cdiVersion": "0.6.0",
        "kind": f"{OWN}/mps",
        "devices": [
            {
                "name": "uid-b-0",
                "containerEdits": {
                    "env": [
                        "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps",
                        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=12288M",
                        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30",
                    ],
                    "mounts": [
                        {
                            "hostPath": pipe,
                            "containerPath": "/tmp/nvidia-mps",
                            "options": ["rw", "nosuid", "nodev", "bind"],
                        }
                    ],
                },
            }
        ],
    }
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in str(spec_of(node, "uid-a"))  # no compute asked: no cap
    pid = daemons(node).daemon(GPU0).pid()
    assert pid is not None and daemons(node).users() == {GPU0: frozenset({"uid-a/0", "uid-b/0"})}
    assert k.unprepare(plugin, [("ns", "uid-a", "a")]) == {"uid-a": ""}
    assert not (node.root / "cdi" / f"{OWN}-mps-uid-a.json").exists()
    assert daemons(node).daemon(GPU0).pid() == pid  # the other share still uses it
    assert k.unprepare(plugin, [("ns", "uid-b", "b")]) == {"uid-b": ""}
    assert (daemons(node).daemon(GPU0).pid(), list((node.root / "cdi").glob("*.json"))) == (None, [])


def test_a_claim_charged_the_whole_gpu_is_prepared_whole_without_mps(node: Driver) -> None:
    k = kubelet(node)
    plugin = k.wait_for_plugin()
    node.store.claims[("ns", "w")] = allocated("w", "uid-w", [share("gpu-1", "s-w", "32Gi")])
    answer = k.prepare(plugin, [("ns", "uid-w", "w")])["uid-w"]
    assert (answer.error, list(answer.devices[0].cdi_device_ids)) == ("", [f"nvidia.com/gpu={DGX1['gpu-1']}"])
    assert daemons(node).users() == {}


def test_mps_shares_of_two_gpus_in_one_claim_are_refused_and_nothing_starts(node: Driver) -> None:
    k = kubelet(node)
    plugin = k.wait_for_plugin()
    results = [share("gpu-0", "s-1", "8Gi"), {**share("gpu-1", "s-2", "8Gi"), "request": "gpu2"}]
    node.store.claims[("ns", "two")] = allocated("two", "uid-2", results)
    error = k.prepare(plugin, [("ns", "uid-2", "two")])["uid-2"].error
    assert "MPS shares of 2 GPUs (gpu-0, gpu-1)" in error and "a container reaches one MPS daemon" in error
    assert (daemons(node).users(), node.checkpointed()) == ({}, ())


def test_a_share_whose_daemon_cannot_start_is_refused_and_forgotten(node: Driver) -> None:
    k = kubelet(node)
    plugin = k.wait_for_plugin()
    daemons(node)._program = "/bin/false"
    node.store.claims[("ns", "a")] = allocated("a", "uid-a", [share("gpu-0", "s-a", "8Gi")])
    error = k.prepare(plugin, [("ns", "uid-a", "a")])["uid-a"].error
    assert f"GPU {GPU0}" in error and "exit status 1" in error
    assert node.checkpointed() == () and not list((node.root / "cdi").glob("*.json"))


def test_a_restarted_driver_restarts_the_dead_daemon_and_removes_specs_no_claim_owns(node: Driver) -> None:
    k = kubelet(node)
    plugin = k.wait_for_plugin()
    node.store.claims[("ns", "a")] = allocated("a", "uid-a", [share("gpu-0", "s-a", "8Gi")])
    assert k.prepare(plugin, [("ns", "uid-a", "a")])["uid-a"].error == ""
    node.stop()
    killed(daemons(node).daemon(GPU0).pid() or 0)  # died while the driver was down
    stale = node.root / "cdi" / f"{OWN}-mps-uid-gone.json"  # its claim was forgotten mid-unprepare
    stale.write_text("{}")
    node.start()  # a new Preparer over the same checkpoint: it adopts what the checkpoint holds
    k.wait_for_plugin()
    assert daemons(node).daemon(GPU0).pid() is not None
    assert daemons(node).users() == {GPU0: frozenset({"uid-a/0"})}
    assert not stale.exists() and spec_of(node, "uid-a")["devices"][0]["name"] == "uid-a-0"
    (device,) = Checkpoint(node.checkpoint_path).get("uid-a").devices  # type: ignore[union-attr]
    assert device.cdi_device_ids[1] == f"{OWN}/mps=uid-a-0"
