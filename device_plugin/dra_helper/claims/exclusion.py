"""Who may change what, between claims: one ticket per claim UID, and one claim per device.

Boundary: bookkeeping only, in memory; what is done under a ticket is the Preparer's
(claims/prepare.py).

Claim tickets (ClaimLocks). The kubelet may prepare and unprepare one claim at the same moment (a
Prepare that it gave up on is still running here), so a claim's prepared state must only move the
way the
kubelet asked:
- every Prepare or Unprepare of a UID holds a Ticket from start to end; the entry of a UID lives
  exactly while some ticket refers to it (a reference count, under one small lock), so entries
  neither leak nor come back to life with a fresh epoch while an older Prepare is still in flight;
- an Unprepare, under the UID's lock, bumps the epoch (`supersede`); a Prepare that began before
  that sees `still_wanted()` False under the lock and writes nothing, whenever its API read returns.
The lock is taken only around the short decide-and-write step, never around an API read: an
Unprepare never waits for the API server. A Prepare whose read runs on the serving loop and whose
write runs in a worker thread holds its ticket across both (`issue` and `release`, not the `with`),
so that the entry lives until the write is over, even when the kubelet leaves in between.

Device holders (DeviceHolders): exclusivity checked on the node, behind the scheduler's, rebuilt
from the checkpoint at start (`load`) and changed by the Preparer under a claim's lock. The
scheduler should never allocate one device to two claims, but a stale checkpoint, a claim
re-allocated while the kubelet was away, or a scheduler bug would otherwise hand one GPU (or one MIG
device: each is a device of its own name here, and a GPU in MIG mode is published only through them)
to two pods. So a device already prepared for another claim is refused, naming both claims, unless
one of the two holds it with adminAccess: Kubernetes' admin access (an allocation result's
`adminAccess: true`, per device) grants access to devices that are in use, so the scheduler
allocates an in-use device to an admin claim on purpose. An admin holder shares with every other
holder, ordinary or admin; ordinary holders exclude each other, except shares: holders of a `Share`
of a device (consumable capacity, the scheduler's shareID) share it with other shares, as long as no
two have one share ID and their memory adds up to no more than the device's; a share and a whole
holder exclude each other.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from device_plugin.dra_helper.checkpoint.values import Share


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    epoch: int = 0  # bumped by every Unprepare
    refs: int = 0  # tickets that refer to this entry (guarded by ClaimLocks._lock)


class Ticket:
    """One Prepare's or Unprepare's hold on a UID; `locked()` is the UID's lock, `release()` lets go
    of it."""

    def __init__(self, entry: _Entry, release: Callable[[], None]) -> None:
        self._entry = entry
        self._epoch = entry.epoch  # read under ClaimLocks._lock, when the ticket was issued
        self._release = release
        self._released = False

    def release(self) -> None:
        """The ticket's end (once: a second call does nothing); the UID's entry goes with its last
        ticket."""
        if not self._released:
            self._released = True
            self._release()

    @contextmanager
    def locked(self) -> Iterator[None]:
        with self._entry.lock:
            yield

    def still_wanted(self) -> bool:
        """No Unprepare of this UID succeeded since this ticket was issued (call under
        `locked()`)."""
        return self._entry.epoch == self._epoch

    def supersede(self) -> None:
        """Every ticket issued before this call is no longer wanted (call under `locked()`)."""
        self._entry.epoch += 1
        self._epoch = self._entry.epoch


class ClaimLocks:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    @contextmanager
    def ticket(self, uid: str) -> Iterator[Ticket]:
        """A Ticket for `uid`, valid inside the `with`."""
        ticket = self.issue(uid)
        try:
            yield ticket
        finally:
            ticket.release()

    def issue(self, uid: str) -> Ticket:
        """A Ticket for `uid`, valid until its `release()` (which the caller must make sure
        happens)."""
        with self._lock:
            entry = self._entries.get(uid)
            if entry is None:
                entry = self._entries[uid] = _Entry()
            entry.refs += 1
            return Ticket(entry, lambda: self._drop(uid, entry))

    def _drop(self, uid: str, entry: _Entry) -> None:
        with self._lock:
            entry.refs -= 1
            if entry.refs == 0:
                del self._entries[uid]

    def __len__(self) -> int:
        """UIDs with a Prepare or Unprepare in flight (0 when idle: nothing leaks)."""
        with self._lock:
            return len(self._entries)


# Orders snapshots across DeviceHolders objects too (the Preparer replaces its own when the
# checkpoint is read again): a later snapshot always has a larger number.
_SNAPSHOTS = itertools.count(1)


@dataclass(frozen=True)
class Hold:
    device: str  # its name in the claim's allocation (what messages say)
    admin_access: bool
    share: Share | None = None  # a share of the device, not all of it
    # What makes two holds one device ("": the name). The Preparer passes the CDI device the
    # container gets, so one device under two names (a MIG device's former and current name) is
    # still one device.
    identity: str = ""

    @property
    def key(self) -> str:
        return self.identity or self.device


class DeviceHolders:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # device key -> {claim uid: (label, admin, the device's name in that claim)}
        self._by_device: dict[str, dict[str, tuple[str, bool, str]]] = {}
        # device -> {claim uid: None} of the holders without adminAccess: an ordinary take checks
        # these only (an admin take checks none), so a take costs O(1) however many adminAccess
        # claims share the device (O(n) per take was O(n^2) for n claims of one GPU).
        self._exclusive: dict[str, dict[str, None]] = {}
        # device -> {claim uid: its share}, without adminAccess
        self._shared: dict[str, dict[str, Share]] = {}
        self._by_claim: dict[str, tuple[Hold, ...]] = {}

    def load(self, claims: Iterable[tuple[str, str, Sequence[Hold]]]) -> None:
        """Start from the checkpoint's (uid, label, holds); conflicts there are kept, not
        resolved."""
        for uid, label, holds in claims:
            with self._lock:
                self._add(uid, label, tuple(holds))

    def take(self, uid: str, label: str, holds: Sequence[Hold]) -> str | None:
        """Record `uid` as holding `holds` (replacing what it held), or say which claim holds one
        already."""
        with self._lock:
            for hold in holds:
                # admin access is access to an in-use device: it shares with anyone
                if hold.admin_access:
                    continue
                refused = self._refusal(uid, label, hold)
                if refused:
                    return refused
            self._remove(uid)
            self._add(uid, label, tuple(holds))
            return None

    def _refusal(self, uid: str, label: str, hold: Hold) -> str:
        """Why `uid` may not hold `hold` beside the others ("" when it may); under the lock."""
        whole = self._exclusive.get(hold.key, {})
        # at most two looks: `uid` itself, then one
        other = next((o for o in whole if o != uid), None)
        if other is None and hold.share is None:
            other = next((o for o in self._shared.get(hold.key, {}) if o != uid), None)
        if other is not None:
            return (
                f"device {hold.device} is already prepared for {self._label(hold.key, other)}, not "
                f"for {label}"
            )
        if hold.share is None:
            return ""
        shares = self._other_shares(uid, hold.key)
        twin = next((o for o, s in shares.items() if s.share_id == hold.share.share_id), None)
        if twin is not None:
            twin_label = self._label(hold.key, twin)
            return (
                f"share {hold.share.share_id} of {hold.device} is already prepared for {twin_label}"
            )
        used = sum(s.memory_mib for s in shares.values())
        if not _fits(used, hold.share):
            return (
                f"device {hold.device} has {used} of {hold.share.of_mib} MiB prepared as "
                f"{len(shares)} other shares;"
                f" this share of {hold.share.memory_mib} MiB for {label} does not fit"
            )
        return ""

    def _label(self, key: str, uid: str) -> str:
        return self._by_device[key][uid][0]

    def _other_shares(self, uid: str, key: str) -> dict[str, Share]:
        """The shares of the device that claims other than `uid` hold (under the lock)."""
        return {o: s for o, s in self._shared.get(key, {}).items() if o != uid}

    def release(self, uid: str) -> None:
        with self._lock:
            self._remove(uid)

    def rivals(self, uid: str, holds: Sequence[Hold]) -> list[tuple[str, str]]:
        """(other claim's UID, the device's name in that claim) for each device of `holds` held
        without adminAccess that another claim holds without it too: what `take` would refuse, or a
        conflict the checkpoint was loaded with."""
        with self._lock:
            ordinary = [hold for hold in holds if not hold.admin_access]
            return [
                (other, self._by_device[hold.key][other][2])
                for hold in ordinary
                for other in self._rivals(uid, hold)
            ]

    def _rivals(self, uid: str, hold: Hold) -> list[str]:
        rivals = [o for o in self._exclusive.get(hold.key, {}) if o != uid]
        shares = self._other_shares(uid, hold.key)
        if hold.share is None:
            return rivals + list(shares)
        if not _fits(sum(s.memory_mib for s in shares.values()), hold.share):
            # together they do not fit: each other share is in question
            return rivals + list(shares)
        return rivals + [o for o, s in shares.items() if s.share_id == hold.share.share_id]

    def snapshot(self) -> tuple[int, frozenset[str], Mapping[str, int]]:
        """(a number larger than every earlier snapshot's, the devices held without adminAccess now,
        whole or shared, and the MiB their shares hold of each shared one)."""
        with self._lock:
            shared = {
                self._name(key): sum(s.memory_mib for s in held.values())
                for key, held in self._shared.items()
            }
            names = frozenset(self._name(key) for key in (*self._exclusive, *self._shared))
            return next(_SNAPSHOTS), names, shared

    def _name(self, key: str) -> str:
        """A name the device is held under (the claims' allocations name it; under the lock)."""
        return min(name for _, _, name in self._by_device[key].values())

    def holders(self, device: str) -> tuple[str, ...]:
        """UIDs of the claims that hold the device named `device` (for tests and logs)."""
        with self._lock:
            return tuple(
                sorted(
                    u
                    for held in self._by_device.values()
                    for u, (_, _, n) in held.items()
                    if n == device
                )
            )

    def _add(self, uid: str, label: str, holds: tuple[Hold, ...]) -> None:
        self._by_claim[uid] = holds
        for hold in holds:
            self._by_device.setdefault(hold.key, {})[uid] = (label, hold.admin_access, hold.device)
            if hold.admin_access:
                continue
            if hold.share is None:
                self._exclusive.setdefault(hold.key, {})[uid] = None
            else:
                self._shared.setdefault(hold.key, {})[uid] = hold.share

    def _remove(self, uid: str) -> None:
        for hold in self._by_claim.pop(uid, ()):
            for index in (self._by_device, self._exclusive, self._shared):
                held = index.get(hold.key)
                if held is not None:
                    held.pop(uid, None)
                    if not held:
                        del index[hold.key]


def _fits(used_mib: int, share: Share) -> bool:
    """Whether `share` fits its device beside shares holding `used_mib` of it."""
    return used_mib + share.memory_mib <= share.of_mib
