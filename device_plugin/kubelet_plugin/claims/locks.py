"""One lock and one epoch per claim UID, so that a claim's prepared state only moves the way the kubelet asked.

Boundary: bookkeeping only; what is done under the lock is the Preparer's. The kubelet may prepare and
unprepare one claim at the same moment (a Prepare that it gave up on is still running here), so:
- every Prepare or Unprepare of a UID holds a Ticket from start to end; the entry of a UID lives exactly
  while some ticket refers to it (a reference count, under one small lock), so entries neither leak nor
  come back to life with a fresh epoch while an older Prepare is still in flight;
- an Unprepare, under the UID's lock, bumps the epoch (`supersede`); a Prepare that began before that
  sees `still_wanted()` False under the lock and writes nothing, whenever its API read returns.
The lock is taken only around the short decide-and-write step, never around an API read: an Unprepare
never waits for the API server. A Prepare whose read runs on the serving loop and whose write runs in a
worker thread holds its ticket across both (`issue` and `release`, not the `with`), so that the entry
lives until the write is over, even when the kubelet leaves in between.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    epoch: int = 0  # bumped by every Unprepare
    refs: int = 0  # tickets that refer to this entry (guarded by ClaimLocks._lock)


class Ticket:
    """One Prepare's or Unprepare's hold on a UID; `locked()` is the UID's lock, `release()` lets go of it."""

    def __init__(self, entry: _Entry, release: Callable[[], None]) -> None:
        self._entry = entry
        self._epoch = entry.epoch  # read under ClaimLocks._lock, when the ticket was issued
        self._release = release
        self._released = False

    def release(self) -> None:
        """The ticket's end (once: a second call does nothing); the UID's entry goes with its last ticket."""
        if not self._released:
            self._released = True
            self._release()

    @contextmanager
    def locked(self) -> Iterator[None]:
        with self._entry.lock:
            yield

    def still_wanted(self) -> bool:
        """No Unprepare of this UID succeeded since this ticket was issued (call under `locked()`)."""
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
        """A Ticket for `uid`, valid until its `release()` (which the caller must make sure happens)."""
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
