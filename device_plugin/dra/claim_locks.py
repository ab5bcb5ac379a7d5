"""One lock and one epoch per claim UID, so that a claim's prepared state only moves the way the kubelet asked.

Boundary: bookkeeping only; what is done under the lock is the Preparer's. The kubelet may prepare and
unprepare one claim at the same moment (a Prepare that it gave up on is still running here), so:
- every Prepare or Unprepare of a UID holds a Ticket from start to end; the entry of a UID lives exactly
  while some ticket refers to it (a reference count, under one small lock), so entries neither leak nor
  come back to life with a fresh epoch while an older Prepare is still in flight;
- an Unprepare, under the UID's lock, bumps the epoch (`supersede`); a Prepare that began before that
  sees `still_wanted()` False under the lock and writes nothing, whenever its API read returns.
The lock is taken only around the short decide-and-write step, never around an API read: an Unprepare
never waits for the API server.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    epoch: int = 0  # bumped by every Unprepare
    refs: int = 0  # tickets that refer to this entry (guarded by ClaimLocks._lock)


class Ticket:
    """One Prepare's or Unprepare's hold on a UID; `locked()` is the UID's lock."""

    def __init__(self, entry: _Entry) -> None:
        self._entry = entry
        self._epoch = entry.epoch  # read under ClaimLocks._lock, when the ticket was issued

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
        """A Ticket for `uid`, valid inside the `with`; the UID's entry is dropped with its last ticket."""
        with self._lock:
            entry = self._entries.get(uid)
            if entry is None:
                entry = self._entries[uid] = _Entry()
            entry.refs += 1
            ticket = Ticket(entry)
        try:
            yield ticket
        finally:
            with self._lock:
                entry.refs -= 1
                if entry.refs == 0:
                    del self._entries[uid]

    def __len__(self) -> int:
        """UIDs with a Prepare or Unprepare in flight (0 when idle: nothing leaks)."""
        with self._lock:
            return len(self._entries)
