"""Checkpointed claims the kubelet will never unprepare (it restarted, or the node rebooted, while their
pods went away) are dropped at start on the API server's word, and only on it (issue 34).

Each case prepares claims, restarts (a fresh Preparer over the same checkpoint), changes what the API
server says of one claim, and runs the clean-up: the claim is dropped (its device free again) when the
answer says it is no longer this node's, kept when the answer is missing, fails, or cannot be read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.claims.claim import ClaimRef
from device_plugin.dra_helper.claims.cleanup import CleanUp, clean_up
from device_plugin.dra_helper.claims.prepare import Preparer
from tests.adversarial.dra.harness import DRIVER, Devices, FetchedClaims, HeldClaims, prepared_here

Body = dict[str, Any]


class FailingReads:
    """An API server that answers every claim read with `error` (a 500, a timeout)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def fetch_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        raise self.error


def restarted(root: Path, fetcher: FetchedClaims | FailingReads) -> tuple[Preparer, Checkpoint]:
    """A Preparer over the checkpoint under `root`, as the driver makes it at start, and that checkpoint."""
    checkpoint = Checkpoint(root / "plugins" / DRIVER / "checkpoint.json")
    driver = Devices().decision()
    return Preparer(driver_name=DRIVER, fetcher=fetcher, driver=driver, checkpoint=checkpoint), checkpoint


def prepared(root: Path) -> HeldClaims:
    """Claims `victim` (gpu-1) and `other` (gpu-2), prepared (each reserved for a pod, as HeldClaims.add makes them)."""
    claims = HeldClaims()
    refs = [ClaimRef(*claims.add("victim", "uid-v", "gpu-1")), ClaimRef(*claims.add("other", "uid-o", "gpu-2"))]
    preparer, _ = restarted(root, claims.fetched())
    assert {uid: r.error for uid, r in prepared_here(preparer, refs).items()} == {"uid-v": "", "uid-o": ""}
    return claims


def gone(body: Body) -> Body | None:
    return None


def recreated(body: Body) -> Body:
    return {**body, "metadata": {**body["metadata"], "uid": "uid-new"}}


def deallocated(body: Body) -> Body:
    return {**body, "status": {}}


def elsewhere(body: Body) -> Body:
    result = {"request": "g", "driver": DRIVER, "pool": "node-b", "device": "gpu-1"}
    return {**body, "status": {**body["status"], "allocation": {"devices": {"results": [result]}}}}


def unreserved(body: Body) -> Body:
    return {**body, "status": {**body["status"], "reservedFor": []}}


DROPPED = [
    (gone, "the ResourceClaim is gone (404)"),
    (recreated, "the ResourceClaim of that name is another claim now (uid uid-new)"),
    (deallocated, "the ResourceClaim is no longer allocated"),
    (elsewhere, "the ResourceClaim is allocated to another node"),
    (unreserved, "the ResourceClaim is reserved for no pod"),
]


def cleaned(preparer: Preparer, checkpoint: Checkpoint, fetcher: FetchedClaims | FailingReads) -> CleanUp:
    return asyncio.run(clean_up(preparer, checkpoint, fetcher, DRIVER))


@pytest.mark.parametrize(("change", "why"), DROPPED, ids=[c.__name__ for c, _ in DROPPED])
def test_a_claim_the_api_server_says_is_not_ours_is_dropped_and_its_device_freed(
    tmp_path: Path, change: Callable[[Body], Body | None], why: str
) -> None:
    claims = prepared(tmp_path)
    changed = change(claims.claims.pop(("ns", "victim")))
    if changed is not None:
        claims.claims[("ns", "victim")] = changed
    preparer, checkpoint = restarted(tmp_path, claims.fetched())
    assert preparer.holders.holders("gpu-1") == ("uid-v",)
    outcome = cleaned(preparer, checkpoint, claims.fetched())
    assert outcome == CleanUp(dropped={"uid-v": why}, kept={}, failed={})
    assert checkpoint.uids() == ("uid-o",) and preparer.holders.holders("gpu-1") == ()
    assert checkpoint.settle(5.0)  # stopped: the compaction of the old journals ends before the next start
    assert restarted(tmp_path, claims.fetched())[1].uids() == ("uid-o",)  # durable


def malformed(body: Body) -> Body:
    return {**body, "status": "a string"}


def reserved_for_a_string(body: Body) -> Body:
    return {**body, "status": {**body["status"], "reservedFor": "pod-1"}}


KEPT = [
    (malformed, "malformed ResourceClaim: status is a str"),
    (reserved_for_a_string, "malformed ResourceClaim: status.reservedFor is not a list"),
]


@pytest.mark.parametrize(("change", "why"), KEPT, ids=[c.__name__ for c, _ in KEPT])
def test_a_claim_whose_body_cannot_be_read_is_kept(tmp_path: Path, change: Callable[[Body], Body], why: str) -> None:
    claims = prepared(tmp_path)
    claims.claims[("ns", "victim")] = change(claims.claims[("ns", "victim")])
    preparer, checkpoint = restarted(tmp_path, claims.fetched())
    outcome = cleaned(preparer, checkpoint, claims.fetched())
    assert outcome.dropped == {} and list(outcome.kept) == ["uid-v"] and why in outcome.kept["uid-v"]
    assert checkpoint.uids() == ("uid-o", "uid-v") and preparer.holders.holders("gpu-1") == ("uid-v",)


@pytest.mark.parametrize(
    "error",
    [RuntimeError("HTTP 500 Internal Server Error"), RuntimeError("no answer from the API server within 5 s")],
    ids=["server-error", "timeout"],
)
def test_no_claim_is_dropped_when_the_reads_fail(tmp_path: Path, error: Exception) -> None:
    prepared(tmp_path)
    preparer, checkpoint = restarted(tmp_path, FailingReads(error))
    outcome = cleaned(preparer, checkpoint, FailingReads(error))
    assert outcome == CleanUp(dropped={}, kept={"uid-o": str(error), "uid-v": str(error)}, failed={})
    assert checkpoint.uids() == ("uid-o", "uid-v")


def test_claims_still_ours_are_kept_without_a_word(tmp_path: Path) -> None:
    claims = prepared(tmp_path)
    preparer, checkpoint = restarted(tmp_path, claims.fetched())
    assert cleaned(preparer, checkpoint, claims.fetched()) == CleanUp(dropped={}, kept={}, failed={})
    assert checkpoint.uids() == ("uid-o", "uid-v")
