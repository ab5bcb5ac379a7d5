"""Another claim recorded on a device that the claim being prepared was allocated: is it still
backed?

Boundary: the API server's word on the rival claims, read through the ClaimFetcher from a worker
thread (on the serving loop, event_loop.run); no lock of the Preparer's is taken here and nothing is
written: the Preparer (claims/prepare.py) forgets the rivals this finds unbacked. The API server is
the record of allocations and the checkpoint its local copy, and the scheduler never allocates an
exclusive device to two claims at once. So when the claim being prepared was just read allocated to
a device that the checkpoint also records for another claim, that other claim's record is a ghost (a
Prepare whose answer was lost when an instance died, an unprepare the kubelet never sent, a torn
read of two instances' writes) unless the API server still allocates the device to it. A rival is
unbacked only on the server's clear word: gone (404), another UID, deallocated, or allocated other
devices. A read that fails or takes too long keeps it (and the claim being prepared is refused
naming both, as before).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from device_plugin.core.short_text import one_line
from device_plugin.dra_helper.claims.claim import ClaimBodyError, ClaimFetcher, read_allocation
from device_plugin.serving import event_loop

log = logging.getLogger(__name__)

# one rival's read, in the prepare worker (the kubelet's Prepare waits meanwhile)
READ_TIMEOUT_S = 5.0


def why_unbacked(
    rival_uid: str, device: str, pool: str, body: Mapping[str, Any] | None, driver_name: str
) -> str:
    """Why the API server's answer for the rival shows it does not hold `device` of `pool` ("" when
    it does). ClaimBodyError: a body of the wrong shape (the caller keeps the rival)."""
    if body is None:
        return "its ResourceClaim is gone"
    allocation = read_allocation(body, driver_name)
    if allocation.uid and allocation.uid != rival_uid:
        return f"its ResourceClaim is another claim now (uid {one_line(allocation.uid, 64)})"
    if not any(d.device == device and d.pool == pool for d in allocation.devices):
        return f"its ResourceClaim is not allocated {device} (any more)"
    return ""


def read_verdict(
    fetcher: ClaimFetcher,
    namespace: str,
    name: str,
    rival_uid: str,
    device: str,
    pool: str,
    driver_name: str,
) -> str:
    """why_unbacked from a fresh read ("" also when the read fails: on doubt the rival stays). From
    a thread."""
    try:
        body = event_loop.run(fetcher.fetch_claim(namespace, name), timeout_s=READ_TIMEOUT_S)
        return why_unbacked(rival_uid, device, pool, body, driver_name)
    except ClaimBodyError as error:
        log.warning(
            "claim %s/%s: malformed ResourceClaim (%s); it keeps %s", namespace, name, error, device
        )
    except Exception as error:
        reason = one_line(str(error) or type(error).__name__, 200)
        log.warning(
            "claim %s/%s: cannot read its ResourceClaim (%s); it keeps %s",
            namespace,
            name,
            reason,
            device,
        )
    return ""
