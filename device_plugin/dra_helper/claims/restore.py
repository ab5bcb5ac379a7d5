"""Claims the checkpoint set aside (a damaged entry or journal record), restored from the API
server's word.

Boundary: one LIST of ResourceClaims (every namespace, bounded) through the transport, and for each
claim allocated devices of this driver in this node's pool, reserved for a pod and missing from the
checkpoint, a settle by the Preparer with that body (the driver decides, the devices are held, the
entry written), as a Prepare of it would. The API server is the record of allocations and the
checkpoint its local copy: a claim whose entry was damaged keeps its devices (no other claim is
given them meanwhile) and the kubelet's re-prepare of it is answered as before. Run at start only
when the checkpoint set something aside, before this instance takes claim calls; a failed list is
logged and changes nothing (the kubelet's re-prepare then prepares the claim afresh, as before this
existed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from device_plugin.core.short_text import one_line
from device_plugin.dra_helper.api.kube import newest_resource_version_on_loop
from device_plugin.dra_helper.api.slices import GROUP
from device_plugin.dra_helper.api.transport import ApiTransport
from device_plugin.dra_helper.claims.claim import (
    ClaimBodyError,
    ClaimRead,
    ClaimRef,
    read_allocation,
)
from device_plugin.dra_helper.claims.cleanup import reserved
from device_plugin.dra_helper.claims.prepare import Preparer, claim_label

log = logging.getLogger(__name__)

# every claim of a large cluster; the read is once, at a damaged start
MAX_LIST_BYTES = 256 * 1024 * 1024
LIST_TIMEOUT_S = 30.0


def ours_missing(
    items: list[Any], checkpointed: set[str], driver_name: str, pool: str
) -> list[tuple[ClaimRef, Mapping[str, Any]]]:
    """The claims of the list that this node holds by the API server's word and the checkpoint
    lacks."""
    found = []
    for body in items:
        if not isinstance(body, Mapping):
            continue
        try:
            allocation = read_allocation(body, driver_name)
            if not allocation.uid or allocation.uid in checkpointed or not reserved(body):
                continue
        except ClaimBodyError:
            continue
        if any(d.pool == pool for d in allocation.devices):
            meta = body["metadata"]
            found.append(
                (
                    ClaimRef(
                        str(meta.get("namespace", "")), allocation.uid, str(meta.get("name", ""))
                    ),
                    body,
                )
            )
    return found


async def restore(
    preparer: Preparer,
    transport: ApiTransport,
    discovered: Callable[[], str | None],
    driver_name: str,
    pool: str,
    checkpointed: set[str],
) -> list[str]:
    """Restore what the API server says this node holds and the checkpoint lost; the UIDs
    restored."""
    try:
        version = discovered() or await newest_resource_version_on_loop(transport)
        answer = await transport.send(
            "GET",
            f"/apis/{GROUP}/{version}/resourceclaims",
            timeout_s=LIST_TIMEOUT_S,
            limit_bytes=MAX_LIST_BYTES,
        )
        answer.check("listing ResourceClaims")
        listed = answer.json("listing ResourceClaims")
        items = listed.get("items") if isinstance(listed, dict) else None
    except Exception as error:  # no restore: the kubelet's re-prepare prepares such a claim afresh
        log.warning(
            "DRA checkpoint: cannot list ResourceClaims to restore what was set aside: %s",
            one_line(str(error), 300),
        )
        return []
    restored = []
    for ref, body in ours_missing(
        items if isinstance(items, list) else [], checkpointed, driver_name, pool
    ):
        label = claim_label(ref.namespace, ref.name, ref.uid)
        ticket = preparer.ticket(ref.uid)
        try:
            result = await asyncio.to_thread(preparer.settle, ref, ticket, ClaimRead(body))
        finally:
            ticket.release()
        if result.error:
            log.warning("DRA checkpoint: cannot restore %s: %s", label, result.error)
        else:
            restored.append(ref.uid)
            log.warning(
                "DRA checkpoint: restored %s from the API server (its entry was set aside)", label
            )
    return restored
