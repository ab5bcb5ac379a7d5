"""Forget checkpointed claims the API server says are no longer this node's: the clean-up after a
restart.

Boundary: deciding, from one read of each checkpointed claim's ResourceClaim, which ones to
unprepare, and unpreparing them through the Preparer (its claim lock, its checkpoint delete, its
device holders); no gRPC, no timers. The kubelet calls NodeUnprepareResources for a claim it no
longer needs, but not always: a kubelet restarted, or a node rebooted, while a pod went away may
never call it, and the claim's devices would stay held here (refusing the next claim that is given
them) for ever. So at start,
after the checkpoint is loaded, each claim is read once, and dropped only on the API server's word:

- 404: the claim is gone;
- a claim of that name with another UID: ours was deleted, and this is a new one;
- no `status.allocation`: deallocated;
- allocated, but none of this driver's results in the pools the claim was prepared from: allocated
  to another node;
- allocated here, but `status.reservedFor` empty: no pod uses it (a pod that reserves it later makes
  the kubelet call NodePrepareResources, which prepares it afresh).

A read that fails (an error, a timeout, a body of the wrong shape) or is not answered within the
budget keeps the claim: on doubt, the claim stays until the kubelet unprepares it. The helper runs
it once the checkpoint is read and before this instance takes claim calls (plugin.py); in
rolling-update mode the other instance serves meanwhile, and the claim may be reserved and prepared
there after our read. So a claim judged stale is read again just before it is unprepared, under the
claim's lock and the lock both instances take for a claim change, and kept unless that second read
says so too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from device_plugin.core.short_text import one_line
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.checkpoint.values import PreparedClaim
from device_plugin.dra_helper.claims.claim import (
    ClaimBodyError,
    ClaimFetcher,
    ClaimRef,
    read_allocation,
)
from device_plugin.dra_helper.claims.prepare import KEPT, Preparer, claim_label
from device_plugin.serving import event_loop

log = logging.getLogger(__name__)

MAX_RESERVED = 256  # the API's limit on status.reservedFor
# How long the start waits for the reads (claim calls are not taken meanwhile): a claim not judged
# by then stays, as on any doubt. Each read has its own timeout too (ApiClaimFetcher,
# claims/api_read.py).
BUDGET_S = 10.0
RECHECK_S = 5.0  # the second read of a claim judged stale, under the locks


@dataclass(frozen=True)
class CleanUp:
    # uid -> why the API server's answer says the claim is no longer ours
    dropped: Mapping[str, str]
    # uid -> why the claim could not be judged (kept, on doubt); absent: still ours
    kept: Mapping[str, str]
    failed: Mapping[str, str]  # uid -> the unprepare's error (a disk error: it stays checkpointed)


def why_stale(
    uid: str, claim: PreparedClaim, body: Mapping[str, Any] | None, driver_name: str
) -> str:
    """Why the ResourceClaim read for checkpointed `claim` shows it is no longer this node's (""
    when it is still ours). ClaimBodyError: the body has the wrong shape (the caller keeps the
    claim)."""
    if body is None:
        return "the ResourceClaim is gone (404)"
    allocation = read_allocation(body, driver_name)
    if allocation.uid and allocation.uid != uid:
        return (
            "the ResourceClaim of that name is another claim now (uid "
            f"{one_line(allocation.uid, 64)})"
        )
    status = body.get("status")
    if not isinstance(status, Mapping) or status.get("allocation") is None:
        return "the ResourceClaim is no longer allocated"
    pools = {device.pool_name for device in claim.devices}
    if pools and not any(device.pool in pools for device in allocation.devices):
        return "the ResourceClaim is allocated to another node"
    if not reserved(body):
        return "the ResourceClaim is reserved for no pod"
    return ""


def reserved(body: Mapping[str, Any]) -> bool:
    status = body.get("status")
    reserved = status.get("reservedFor") if isinstance(status, Mapping) else None
    if reserved is None:
        return False
    if not isinstance(reserved, list) or len(reserved) > MAX_RESERVED:
        raise ClaimBodyError("status.reservedFor is not a list of at most 256 consumers")
    return bool(reserved)


async def clean_up(
    preparer: Preparer,
    checkpoint: Checkpoint,
    fetcher: ClaimFetcher,
    driver_name: str,
    budget_s: float = BUDGET_S,
) -> CleanUp:
    """Read every checkpointed claim (all at once: the fetcher bounds the reads in flight) and
    unprepare those the API server says are no longer this node's; a read still unanswered after
    `budget_s` keeps its claim. Never raises for a claim's sake."""
    claims = {uid: claim for uid in checkpoint.uids() if (claim := checkpoint.get(uid)) is not None}
    reads = {
        uid: asyncio.ensure_future(_verdict(uid, claim, fetcher, driver_name))
        for uid, claim in claims.items()
    }
    if reads:
        await asyncio.wait(reads.values(), timeout=budget_s)
    dropped, kept, failed = {}, {}, {}
    for uid, claim in claims.items():
        read = reads[uid]
        if read.done():
            stale, doubt = read.result()
        else:
            read.cancel()
            stale, doubt = "", f"no answer from the API server within the clean-up's {budget_s:g} s"
        label = claim_label(claim.namespace, claim.name, uid)
        if doubt:
            kept[uid] = doubt
            log.warning(
                "DRA clean-up: keeping %s: cannot tell whether it is still ours: %s", label, doubt
            )
        elif stale:
            ref = ClaimRef(claim.namespace, uid, claim.name)
            recheck = partial(_still_stale, fetcher, uid, claim, driver_name)
            error = await asyncio.to_thread(preparer.unprepare_claim, ref, recheck)
            if error == KEPT:
                log.info("DRA clean-up: keeping %s: read again, it is still this node's", label)
            elif error:
                failed[uid] = error
                log.warning(
                    "DRA clean-up: %s: %s, but unpreparing it failed: %s", label, stale, error
                )
            else:
                dropped[uid] = stale
                log.info("DRA clean-up: unprepared %s: %s", label, stale)
    return CleanUp(dropped, kept, failed)


def _still_stale(fetcher: ClaimFetcher, uid: str, claim: PreparedClaim, driver_name: str) -> bool:
    """The second read, from a worker thread under the locks: stale again on the API server's clear
    word."""
    try:
        body = event_loop.run(fetcher.fetch_claim(claim.namespace, claim.name), timeout_s=RECHECK_S)
        return bool(why_stale(uid, claim, body, driver_name))
    except Exception:  # a failed or malformed read: on doubt the claim stays
        return False


async def _verdict(
    uid: str, claim: PreparedClaim, fetcher: ClaimFetcher, driver_name: str
) -> tuple[str, str]:
    """(why it is stale or "", why it cannot be judged or "")."""
    try:
        body = await fetcher.fetch_claim(claim.namespace, claim.name)
        return why_stale(uid, claim, body, driver_name), ""
    except ClaimBodyError as error:
        return "", f"malformed ResourceClaim: {error}"
    except Exception as error:  # an error or a timeout of the read: the claim stays
        return "", one_line(str(error) or type(error).__name__, 200)
