"""Whether the API server keeps device taints, as the publisher found out, and the words that say
so.

Boundary: state and log lines only; the publisher (dra_helper/api/publisher.py) finds out from the
server's answers and builds the slices accordingly (dra_helper/api/slices.py: `taints_kept`). Taints
are written until the server shows it does not keep them: it drops them from what it stores (the
DRADeviceTaints gate off, or Kubernetes older than 1.33), or refuses a write that has them with 400
(a server without the field that decodes strictly). The publisher asks with a dry run of its first
write
that has a taint, before any sick device is stored. Either is logged once and remembered for the
process: from then on a device that a taint keeps from scheduling leaves the pool instead, and
`note` says so for /readyz (which stays green: the pool is published, the sick GPUs are just left
out).
"""

from __future__ import annotations

import logging
from typing import Any

from device_plugin.dra_helper.api.api_errors import ApiError
from device_plugin.dra_helper.api.pool_compare import taint_count, taints_dropped
from device_plugin.dra_helper.api.slice_store import SliceStore, UnconfirmedWrite

log = logging.getLogger(__name__)

FALLBACK = "leaving unhealthy devices out of the pool"
HOW = {
    "dropped": "dropped the device taints",
    "refused": "refused the device taints",
}


class TaintSupport:
    def __init__(self) -> None:
        # None: not known yet (no write with a taint has been answered)
        self.kept: bool | None = None
        self.note = ""  # for /readyz once the server keeps no taints

    @property
    def usable(self) -> bool:
        """Whether to write taints: yes until the server has shown it does not keep them."""
        return self.kept is not False

    def found_kept(self) -> None:
        self.kept = True

    def found_off(self, how: str, slice_name: str, detail: str) -> None:
        """The server `how` ("dropped" or "refused") the taints of a write of `slice_name`; logged
        once."""
        if self.kept is False:
            return
        self.kept = False
        words = HOW[how]
        self.note = f"the API server {words}{f' ({detail})' if detail else ''}: {FALLBACK}"
        log.warning(
            "the API server %s of slice %s (%sfeature gate DRADeviceTaints off, or Kubernetes "
            "older than 1.33): "
            "%s until the driver restarts",
            words,
            slice_name,
            f"{detail}; " if detail else "",
            FALLBACK,
        )


def write_checked(
    store: SliceStore,
    taints: TaintSupport,
    version: str,
    obj: dict[str, Any],
    existing: dict[str, Any],
    *,
    dry_run: bool = False,
) -> bool:
    """Write one slice (or dry-run it) and check the answer; False when it shows that the server
    keeps no taints (the pool must be built again without the tainted devices). UnconfirmedWrite:
    the answer holds another spec than the one sent."""
    name = obj["metadata"]["name"]
    try:
        stored = store.write(version, obj, existing.get(name), dry_run=dry_run)
    except ApiError as error:
        if error.status != 400 or not taint_count(obj["spec"]):
            raise
        taints.found_off("refused", name, f"HTTP 400: {error.message()}")
        return False
    if taint_count(obj["spec"]):
        if taints_dropped(obj, stored):
            taints.found_off("dropped", name, "a dry run came back without them" if dry_run else "")
            return False
        taints.found_kept()
    if not dry_run and (not isinstance(stored, dict) or stored.get("spec") != obj["spec"]):
        raise UnconfirmedWrite(f"slice {name}: answered with another spec")
    return True
