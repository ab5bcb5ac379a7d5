"""A rolling replacement (socketNames: per-instance, kubelet 1.33+): two instances of the driver serve at
once on one kubelet directory, each on its own sockets (`<driver>-<uid>-reg.sock`, `dra-<uid>.sock`),
and Prepare and Unprepare of one claim reach different instances. Under a steady stream of calls: no
call fails, no claim is lost or doubled, and the old instance's stop leaves the slices to the new one."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.kubelet_plugin.api.kube import api_client
from device_plugin.kubelet_plugin.checkpoint.store import Checkpoint
from device_plugin.kubelet_plugin.service.grpc_service import SocketPaths
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake import FakeNvml
from tests.adversarial.dra.harness import prepare, unprepare
from tests.dra.api_standin import ApiStandin
from tests.dra.driver_node import DRIVER, NODE, Node, eventually

OLD, NEW = "0a0a0a0a-0000-4000-8000-000000000001", "0b0b0b0b-0000-4000-8000-000000000002"
GPUS = [f"gpu-{i}" for i in range(8)]


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    n = Node(root, api, FakeNvml.from_machine("dgx1-v100"))
    n.config_file.write_text("version: v1\ngpuDevicePlugin:\n  mode: dra\n  socketNames: per-instance\n")
    yield n
    api.down()
    shutil.rmtree(root, ignore_errors=True)


def _start(node: Node, instance: str) -> NodeRuntime[DraFrontEnd]:
    config = node.load()
    client = api_client(node.api.host)
    front_end = DraFrontEnd.for_config(config, client, node_name=NODE, backoff_max_s=0.2, instance=instance)
    runtime = NodeRuntime(FakeNvml.from_machine("dgx1-v100"), config, front_end, load_config=node.load)
    runtime.start()
    assert eventually(lambda: front_end.server.serving()[0])
    return runtime


def _unprepare_errors(endpoint: Path, claim: tuple[str, str, str]) -> list[str]:
    return [entry.error for entry in unprepare(endpoint, [claim]).claims.values() if entry.error]


def _errors(answer: object) -> list[str]:
    return [entry.error for entry in answer.claims.values() if entry.error]  # type: ignore[attr-defined]


def test_a_rolling_replacement_serves_every_call_and_keeps_every_claim_and_the_slices(node: Node) -> None:
    old_paths, new_paths = (SocketPaths.for_driver(DRIVER, node.root, i) for i in (OLD, NEW))
    assert old_paths.registration.name == f"{DRIVER}-{OLD}-reg.sock" and new_paths.endpoint.name == f"dra-{NEW}.sock"
    old = _start(node, OLD)
    assert eventually(lambda: len(node.listed()) == len(GPUS))
    held: dict[str, tuple[str, str, str]] = {}  # GPU -> the claim prepared on it now
    failures: list[str] = []
    step = 0

    def churn(prepare_at: Path, unprepare_at: Path, rounds: int) -> None:
        """Prepare a claim at one instance, a rival on its GPU at the other (refused), and unprepare most
        claims at the other instance; every third stays prepared until its GPU comes round again."""
        nonlocal step
        for _ in range(rounds):
            gpu = GPUS[step % len(GPUS)]
            if gpu in held:
                failures.extend(_unprepare_errors(unprepare_at, held.pop(gpu)))
            claim = node.claim(f"c{step}", f"uid-{step}", gpu)
            failures.extend(_errors(prepare(prepare_at, [claim])))
            refused = _errors(prepare(unprepare_at, [node.claim(f"r{step}", f"uid-r{step}", gpu)]))
            if not (len(refused) == 1 and f"device {gpu} is already prepared for claim ns/c{step}" in refused[0]):
                failures.append(f"the rival of c{step} on {gpu} was not refused: {refused}")
            if step % 3 == 2:
                held[gpu] = claim
            else:
                failures.extend(_unprepare_errors(unprepare_at, claim))
            step += 1

    churn(old_paths.endpoint, old_paths.endpoint, 8)  # the old instance alone
    new = _start(node, NEW)  # the rolling replacement starts beside it
    churn(old_paths.endpoint, new_paths.endpoint, 16)
    churn(new_paths.endpoint, old_paths.endpoint, 16)
    assert old.stop()  # SIGTERM: its own sockets go, the slices stay with the new instance
    assert not old_paths.registration.exists() and not old_paths.endpoint.exists()
    assert len(node.listed()) == len(GPUS)
    churn(new_paths.endpoint, new_paths.endpoint, 8)
    assert failures == []
    deletes = [p for m, p in node.api.requests if m == "DELETE" and "/resourceslices" in p]
    assert deletes == []
    expected = sorted(c[1] for c in held.values())
    new.stop()
    assert Checkpoint(node.root / "plugins" / DRIVER / "checkpoint.json").uids() == tuple(expected)
