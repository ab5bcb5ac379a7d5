"""Which prepared claim holds which device: exclusivity checked on the node, behind the scheduler's.

Boundary: an in-memory map, rebuilt from the checkpoint at start (`load`), changed by the Preparer under
a claim's lock. The scheduler should never allocate one device to two claims, but a stale checkpoint, a
claim re-allocated while the kubelet was away, or a scheduler bug would otherwise hand one GPU (or one
MIG device: each is a device of its own name here, and a GPU in MIG mode is published only through
them) to two pods. So a device already prepared for another claim is refused, naming both claims,
unless one of the two holds it with adminAccess: Kubernetes' admin access (an allocation result's
`adminAccess: true`, per device) grants access to devices that are in use, so the scheduler allocates
an in-use device to an admin claim on purpose. An admin holder shares with every other holder, ordinary
or admin; ordinary holders exclude each other. This driver supports no other sharing mode in DRA mode.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Orders snapshots across DeviceHolders objects too (the Preparer replaces its own when the checkpoint is read
# again): a later snapshot always has a larger number.
_SNAPSHOTS = itertools.count(1)


@dataclass(frozen=True)
class Hold:
    device: str
    admin_access: bool


class DeviceHolders:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_device: dict[str, dict[str, tuple[str, bool]]] = {}  # device -> {claim uid: (label, admin)}
        # device -> {claim uid: None} of the holders without adminAccess: an ordinary take checks these
        # only (an admin take checks none), so a take costs O(1) however many adminAccess claims share the
        # device (O(n) per take was O(n^2) for n claims of one GPU).
        self._exclusive: dict[str, dict[str, None]] = {}
        self._by_claim: dict[str, tuple[Hold, ...]] = {}

    def load(self, claims: Iterable[tuple[str, str, Sequence[Hold]]]) -> None:
        """Start from the checkpoint's (uid, label, holds); conflicts there are kept, not resolved."""
        for uid, label, holds in claims:
            with self._lock:
                self._add(uid, label, tuple(holds))

    def take(self, uid: str, label: str, holds: Sequence[Hold]) -> str | None:
        """Record `uid` as holding `holds` (replacing what it held), or say which claim holds one already."""
        with self._lock:
            for hold in holds:
                if hold.admin_access:  # admin access is access to an in-use device: it shares with anyone
                    continue
                rivals = self._exclusive.get(hold.device, {})
                other = next((o for o in rivals if o != uid), None)  # at most two looks: `uid` itself, then one
                if other is not None:
                    label_of_other = self._by_device[hold.device][other][0]
                    return f"device {hold.device} is already prepared for {label_of_other}, not for {label}"
            self._remove(uid)
            self._add(uid, label, tuple(holds))
            return None

    def release(self, uid: str) -> None:
        with self._lock:
            self._remove(uid)

    def snapshot(self) -> tuple[int, frozenset[str]]:
        """(a number larger than every earlier snapshot's, the devices held without adminAccess now)."""
        with self._lock:
            return next(_SNAPSHOTS), frozenset(self._exclusive)

    def holders(self, device: str) -> tuple[str, ...]:
        """UIDs of the claims that hold `device` (for tests and logs)."""
        with self._lock:
            return tuple(sorted(self._by_device.get(device, {})))

    def _add(self, uid: str, label: str, holds: tuple[Hold, ...]) -> None:
        self._by_claim[uid] = holds
        for hold in holds:
            self._by_device.setdefault(hold.device, {})[uid] = (label, hold.admin_access)
            if not hold.admin_access:
                self._exclusive.setdefault(hold.device, {})[uid] = None

    def _remove(self, uid: str) -> None:
        for hold in self._by_claim.pop(uid, ()):
            for index in (self._by_device, self._exclusive):
                held = index.get(hold.device)
                if held is not None:
                    held.pop(uid, None)
                    if not held:
                        del index[hold.device]
