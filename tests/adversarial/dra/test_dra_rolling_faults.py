"""Rolling-update faults injected at the exact point (issue 46), each a deterministic regression case.

Two instances share one checkpoint folder as in a surge: each a Preparer over the folder, its claim changes
serialised by a CallLock on `serialize.lock` (dra_helper/plugin.py wires them the same way). The API's
word on each claim is a HeldClaims table.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.checkpoint.values import PreparedClaim
from device_plugin.dra_helper.claims.claim import ClaimRef, read_allocation
from device_plugin.dra_helper.claims.cleanup import clean_up
from device_plugin.dra_helper.claims.prepare import Preparer
from device_plugin.dra_helper.service.instance_lock import CALL_LOCK, CallLock
from device_plugin.serving import event_loop
from testbed.dra_node import Node, node  # noqa: F401  (the fixture: a whole driver on stand-ins)
from tests.adversarial.dra.harness import DRIVER, Devices, HeldClaims, prepared_here

ROOT = Path(__file__).resolve().parents[3]

# Instance B in a process of its own: prepares u1 on gpu-0 and dies right after the checkpoint holds it,
# before its CallLock writes the stamp (the window a SIGKILL hit with no instrumentation).
DIES_AFTER_THE_WRITE = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, sys.argv[2])
    from pathlib import Path
    from device_plugin.dra_helper.checkpoint.store import Checkpoint
    from device_plugin.dra_helper.claims.claim import ClaimRef
    from device_plugin.dra_helper.claims.prepare import Preparer
    from device_plugin.dra_helper.service.instance_lock import CALL_LOCK, CallLock
    from tests.adversarial.dra.harness import DRIVER, Devices, HeldClaims, prepared_here

    class DiesAfterPut(Checkpoint):
        def put(self, uid, claim):
            super().put(uid, claim)
            os._exit(9)  # as a SIGKILL would: no finally, no stamp

    folder = Path(sys.argv[1])
    claims = HeldClaims()
    claims.add("c1", "u1", "gpu-0")
    checkpoint = DiesAfterPut(folder / "checkpoint.json", shared=True)
    preparer = None
    calls = CallLock(folder / CALL_LOCK, reload=lambda: preparer.reload(), rounds=lambda: checkpoint.rounds)
    preparer = Preparer(driver_name=DRIVER, fetcher=claims.fetched(), driver=Devices().decision(),
                        checkpoint=checkpoint, serialized=calls.held)
    preparer.open()
    prepared_here(preparer, [ClaimRef("ns", "u1", "c1")])
    """
)


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dra-faults-", dir="/tmp")) / "plugins" / DRIVER
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path.parents[1], ignore_errors=True)


def _instance(folder: Path, claims: HeldClaims) -> Preparer:
    checkpoint = Checkpoint(folder / "checkpoint.json", shared=True)
    preparer: Preparer | None = None

    def reload() -> None:
        assert preparer is not None
        preparer.reload()

    calls = CallLock(folder / CALL_LOCK, reload=reload, rounds=lambda: checkpoint.rounds)
    preparer = Preparer(
        driver_name=DRIVER, fetcher=claims.fetched(), driver=Devices().decision(), checkpoint=checkpoint,
        serialized=calls.held,
    )  # fmt: skip
    preparer.open()
    return preparer


def _on_disk(folder: Path) -> dict[str, tuple[str, ...]]:
    """The checkpoint as a fresh instance reads it: claim UID -> its devices."""
    checkpoint = Checkpoint(folder / "checkpoint.json", shared=True)
    checkpoint.open()
    return {uid: tuple(d.device_name for d in checkpoint.get(uid).devices) for uid in checkpoint.uids()}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "u1_still_allocated",
    [True, False],
    ids=["the-api-still-allocates-gpu-0-to-u1-u2-is-refused", "u1-was-deallocated-its-ghost-is-forgotten"],
)
def test_an_instance_killed_between_its_change_and_its_stamp_never_leaves_a_gpu_confirmed_to_two_claims(
    folder: Path, u1_still_allocated: bool
) -> None:
    claims = HeldClaims()
    if u1_still_allocated:
        claims.add("c1", "u1", "gpu-0")
    u2 = claims.add("c2", "u2", "gpu-0")
    a = _instance(folder, claims)  # instance A: its view of the holders is taken now, before B's change
    b = subprocess.run(
        [sys.executable, "-c", DIES_AFTER_THE_WRITE, str(folder), str(ROOT)], capture_output=True, timeout=60
    )
    assert b.returncode == 9, b.stderr.decode()
    assert _on_disk(folder) == {"u1": ("gpu-0",)}  # B's change is durable; its stamp was never written
    answer = prepared_here(a, [ClaimRef(*u2)])["u2"]
    on_disk = _on_disk(folder)
    holders = [uid for uid, devices in on_disk.items() if "gpu-0" in devices]
    assert len(holders) == 1, on_disk  # never both
    if u1_still_allocated:
        assert "already prepared for claim ns/c1" in answer.error and holders == ["u1"]
    else:
        assert not answer.error and holders == ["u2"]
    restarted = _instance(folder, claims)  # B again: a repeated Prepare of u1 is no confirmation of gpu-0 to it
    again = prepared_here(restarted, [ClaimRef("ns", "u1", "c1")])["u1"]
    assert bool(again.error) is not u1_still_allocated


@pytest.mark.parametrize(
    ("backed", "answered"),
    [({"u1", "u2"}, set()), ({"u1"}, {"u1"}), (set(), set())],
    ids=["both-backed-neither-is-confirmed", "only-u1-backed-u2-forgotten", "neither-backed-neither-confirmed"],
)
def test_a_checkpoint_holding_two_claims_on_one_gpu_never_confirms_both(
    folder: Path, caplog: pytest.LogCaptureFixture, backed: set[str], answered: set[str]
) -> None:
    """However two records of one exclusive GPU came to be (a torn read, an older release), a repeated
    Prepare is no longer answered from the checkpoint alone: the API server's word decides."""
    seed = _instance(folder, HeldClaims())
    writer = HeldClaims()
    for name, uid in (("c1", "u1"), ("c2", "u2")):
        writer.add(name, uid, "gpu-0")
    claim = Devices().decision().decide  # what each record holds: gpu-0, as the driver decides it
    for name, uid in (("c1", "u1"), ("c2", "u2")):
        body = writer.claims[("ns", name)]
        devices, _ = claim(body, read_allocation(body, DRIVER))
        seed._checkpoint.put(uid, PreparedClaim("ns", name, tuple(devices)))  # behind the Preparer's back
    api = HeldClaims()
    for name, uid in (("c1", "u1"), ("c2", "u2")):
        if uid in backed:
            api.add(name, uid, "gpu-0")
    restarted = _instance(folder, api)
    assert sorted(restarted.holders.holders("gpu-0")) == ["u1", "u2"]  # loaded as it is: kept, not resolved
    results = {
        uid: prepared_here(restarted, [ClaimRef("ns", uid, name)])[uid] for name, uid in (("c1", "u1"), ("c2", "u2"))
    }
    confirmed = {uid for uid, result in results.items() if not result.error}
    assert confirmed == answered
    if backed != {"u1"}:
        assert any("are both recorded on gpu-0" in r.getMessage() for r in caplog.records)
    if answered:  # the one confirmed is the one left on gpu-0
        assert {uid for uid, devices in _on_disk(folder).items() if "gpu-0" in devices} == answered


class Reads:
    """A claim's ResourceClaim as the API server answers each read in turn (the last answer repeats)."""

    def __init__(self, *answers: dict[str, Any] | None) -> None:
        self.answers = list(answers)
        self.count = 0

    async def fetch_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        answer = self.answers[min(self.count, len(self.answers) - 1)]
        self.count += 1
        return answer


def test_a_claim_reserved_again_during_the_other_instances_clean_up_is_not_unprepared(folder: Path) -> None:
    """Instance B's clean-up reads c1 while no pod reserves it (stale); a new pod reserves c1 and the kubelet
    prepares it at instance A; B's verdict must not be acted on: the claim is read again first."""
    api = HeldClaims()
    api.add("c1", "u1", "gpu-0")
    a = _instance(folder, api)
    assert not prepared_here(a, [ClaimRef("ns", "u1", "c1")])["u1"].error
    reserved = api.claims[("ns", "c1")]
    unreserved = {**reserved, "status": {**reserved["status"], "reservedFor": []}}
    b = _instance(folder, api)
    reads = Reads(unreserved, reserved)  # the verdict's read, then the one made just before acting on it
    outcome = event_loop.run(clean_up(b, b._checkpoint, reads, DRIVER, budget_s=5.0), timeout_s=10.0)
    assert reads.count == 2 and not outcome.dropped
    assert _on_disk(folder) == {"u1": ("gpu-0",)}  # the running pod's claim is still prepared
    rival = api.add("c9", "u9", "gpu-0")
    assert "already prepared for claim ns/c1" in prepared_here(b, [ClaimRef(*rival)])["u9"].error


def test_a_claim_still_stale_when_read_again_is_unprepared(folder: Path) -> None:
    api = HeldClaims()
    api.add("c1", "u1", "gpu-0")
    a = _instance(folder, api)
    assert not prepared_here(a, [ClaimRef("ns", "u1", "c1")])["u1"].error
    b = _instance(folder, api)
    reads = Reads(None)  # gone, and still gone
    outcome = event_loop.run(clean_up(b, b._checkpoint, reads, DRIVER, budget_s=5.0), timeout_s=10.0)
    assert reads.count == 2 and set(outcome.dropped) == {"u1"} and _on_disk(folder) == {}


@pytest.mark.parametrize("where", ["claim-file", "journal-record"])
def test_a_damaged_entry_of_a_running_pods_claim_is_restored_from_the_api_and_keeps_its_gpu(
    node: Node,  # noqa: F811  (the fixture imported above)
    where: str,
) -> None:
    """One byte changed in a claim's entry (gpu-0 rewritten as gpu-1, still JSON): the CRC sets it aside, and
    the restart restores it from the API server's allocation before it serves; a new claim on gpu-0 is refused
    and the kubelet's re-prepare of the damaged claim is answered (before: forgotten, gpu-0 given away)."""
    node.start()  # the whole driver, on the API and DRA kubelet stand-ins (testbed/dra_node.py)
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    damaged = node.claim("c2", "uid-2", "gpu-0")
    assert not kubelet.prepare(plugin, [damaged])["uid-2"].error
    node.stop()
    claims = node.root / "plugins" / DRIVER / "claims"
    if where == "claim-file":
        Checkpoint(claims.parent / "checkpoint.json").compact()  # the journal folded into claims/uid-2.json
        entry = next(claims.glob("*.json"))
    else:
        entry = max(claims.glob("journal-*.log"))
    entry.write_bytes(entry.read_bytes().replace(b'"gpu-0"', b'"gpu-1"', 1))
    node.start()
    plugin = node.kubelet().wait_for_plugin()
    rival = kubelet.prepare(plugin, [node.claim("c3", "uid-3", "gpu-0")])["uid-3"]
    assert "already prepared for claim ns/c2" in rival.error
    again = kubelet.prepare(plugin, [damaged])["uid-2"]
    assert not again.error and [d.device_name for d in again.devices] == ["gpu-0"]
