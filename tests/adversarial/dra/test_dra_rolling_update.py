"""A rolling replacement (socketNames: per-instance, kubelet 1.33+): two instances of the driver serve at
once on one kubelet directory, each on its own sockets (`<driver>-<uid>-reg.sock`, `dra-<uid>.sock`),
and Prepare and Unprepare of one claim reach different instances. Under a steady stream of calls: no
call fails, no claim is lost or doubled, and the old instance's stop leaves the slices to the new one."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.api_standin import ApiStandin
from testbed.dra_node import DRIVER, NODE, Node, eventually
from testbed.dra_rolling import GPUS, MACHINE, NEW, OLD, launch_instance, replace_driver, start_instance
from tests.adversarial.dra.harness import prepare, unprepare


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    api = ApiStandin().up()
    api.add_node(NODE)
    n = Node(root, api, FakeNvml.from_machine(MACHINE))
    n.config_file.write_text("version: v1\ngpuDevicePlugin:\n  mode: dra\n  socketNames: per-instance\n")
    yield n
    api.down()
    shutil.rmtree(root, ignore_errors=True)


def _unprepare_errors(endpoint: Path, claim: tuple[str, str, str]) -> list[str]:
    return [entry.error for entry in unprepare(endpoint, [claim]).claims.values() if entry.error]


def _errors(answer: object) -> list[str]:
    return [entry.error for entry in answer.claims.values() if entry.error]  # type: ignore[attr-defined]


def test_a_rolling_replacement_serves_every_call_and_keeps_every_claim_and_the_slices(node: Node) -> None:
    old_paths, new_paths = (SocketPaths.for_driver(DRIVER, node.root, i) for i in (OLD, NEW))
    assert old_paths.registration.name == f"{DRIVER}-{OLD}-reg.sock" and new_paths.endpoint.name == f"dra-{NEW}.sock"
    kubelet = node.kubelet()
    old = start_instance(node, kubelet, OLD)
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
    new = start_instance(node, kubelet, NEW)  # the rolling replacement starts beside it
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


def test_under_a_steady_stream_of_prepares_a_rolling_replacement_fails_none_and_never_empties_the_pool(
    node: Node,
) -> None:
    outcome, new = replace_driver(node, rolling=True)
    new.stop()
    assert outcome.failures == ()
    assert outcome.zero_s == 0.0
    assert outcome.slice_deletes == 0
    assert outcome.prepared >= 60
    assert outcome.listed_at_end == len(GPUS)


def test_today_s_replacement_empties_the_pool_and_fails_the_calls_of_the_gap(node: Node) -> None:
    """What the rolling mode is for: stop-then-start deletes the slices and leaves the kubelet without a
    driver until the new one registers (the benchmark prints how long)."""
    outcome, new = replace_driver(node, rolling=False)
    new.stop()
    assert outcome.slice_deletes >= 1
    assert outcome.zero_s > 0.0
    assert outcome.listed_at_end == len(GPUS)


def _kubelet_errors(kubelet: DraKubeletStandin, claim: tuple[str, str, str]) -> list[str]:
    plugin = kubelet.current(DRIVER)
    assert plugin is not None
    return [e.error for e in kubelet.prepare(plugin, [claim]).values() if e.error]  # type: ignore[attr-defined]


def _config(names: str) -> str:
    return f"version: v1\ngpuDevicePlugin:\n  mode: dra\n  socketNames: {names}\n"


@pytest.mark.parametrize(
    ("first", "second"),
    [(("fixed", ""), ("per-instance", NEW)), (("per-instance", OLD), ("fixed", ""))],
    ids=["switching-on-per-instance-names-in-a-surge", "rollout-undo-to-fixed-names-in-a-surge"],
)
def test_a_surge_between_fixed_and_per_instance_names_waits_instead_of_sharing_the_checkpoint(
    node: Node, first: tuple[str, str], second: tuple[str, str]
) -> None:
    """A fixed-name instance takes no call lock, so it never serves beside a rolling-update one: the newcomer
    waits (not registered, checkpoint unread, /readyz says why) and the serving one goes on; once it stops,
    the newcomer takes over."""
    kubelet = node.kubelet()
    node.config_file.write_text(_config(first[0]))
    old = start_instance(node, kubelet, first[1])
    claim = node.claim("held", "uid-held", "gpu-3")
    assert not _kubelet_errors(kubelet, claim)
    # The prepare moves the hints (gpu-3 is held): that republish (generation 2) lands before the window below.
    published = old.front_end.publisher
    assert eventually(lambda: old.front_end.readiness().ok and published.generation == 2)
    assert published.wait_synced(5.0)
    node.config_file.write_text(_config(second[0]))
    requests_before = len(node.api.requests)
    new = launch_instance(node, second[1])
    try:
        time.sleep(1.0)  # two keeper rounds: long enough to have served, were it allowed to
        ready = new.front_end.readiness()
        assert not ready.ok and "instance.lock" in ready.detail and "socketNames" in ready.detail
        assert not new.front_end.server.paths.registration.exists()
        # The waiting one neither writes nor watches the pool (the serving one has nothing to change).
        assert [r for r in node.api.requests[requests_before:] if "resourceslices" in r[1]] == []
        assert old.front_end.readiness().ok
        assert old.stop()
        assert eventually(lambda: kubelet.current(DRIVER) is not None and new.front_end.readiness().ok)
        rival = node.claim("rival", "uid-rival", "gpu-3")
        (refusal,) = _kubelet_errors(kubelet, rival)
        assert "already prepared for claim ns/held" in refusal  # the newcomer read what the first one wrote
    finally:
        new.stop()
