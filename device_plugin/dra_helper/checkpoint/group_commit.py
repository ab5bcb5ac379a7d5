"""Group commit: callers that ask while a commit runs are committed together, in one round.

Boundary: the batching of items and the waking of their callers only; what a commit does is the
caller's `commit` (store.py hands it a journal append: journal.py). Whoever asks while a commit runs
is committed with everyone else waiting, in one round. A caller submits one item and blocks until
the round that carried it has finished. The first caller that finds no round running becomes the
leader: it takes every item queued at that moment (from any thread, any request), hands them to
`commit` in the order they were submitted, wakes exactly their callers, and hands the lead to the
first caller queued meanwhile. No thread of its own, so nothing to start or stop, and no pool to
deadlock. Waking only the callers concerned matters under load: a woken thread must win the
interpreter's lock before it can go on, and a crowd of them woken at once delays the next round's
leader. `commit` returns one outcome per item, so an item can fail alone; an exception raised by
`commit` itself fails every item of its round.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class _Slot(Generic[T]):
    item: T
    woken: threading.Event = field(default_factory=threading.Event)  # done, or made the next leader
    done: bool = False
    result: object = None
    error: BaseException | None = None


class CommitQueue(Generic[T, R]):
    def __init__(self, commit: Callable[[Sequence[T]], Sequence[R | BaseException]]) -> None:
        self._commit = commit
        self._lock = threading.Lock()  # guards _waiting and _running
        self._waiting: list[_Slot[T]] = []
        self._running = False  # a leader holds the lead (committing, or handed it on)
        self.rounds = 0  # commits run: fewer than items when callers overlap

    def submit(self, item: T) -> R:
        """`item`'s outcome, once the round that carried it has been committed (its exception
        raised)."""
        slot = _Slot(item)
        with self._lock:
            self._waiting.append(slot)
            lead, self._running = not self._running, True
        if not lead:
            slot.woken.wait()
        if not slot.done:  # the lead is ours: our item is still waiting, so this round carries it
            self._lead()
        if slot.error is not None:
            raise slot.error
        return slot.result  # type: ignore[return-value]

    def _lead(self) -> None:
        """Commit every waiting item, wake their callers, pass the lead on (or let it go)."""
        with self._lock:
            batch, self._waiting = self._waiting, []
            self.rounds += 1
        try:
            outcomes: Sequence[R | BaseException] = self._commit([slot.item for slot in batch])
            if len(outcomes) != len(batch):
                raise RuntimeError(
                    f"commit answered {len(outcomes)} outcomes for {len(batch)} items"
                )
        except BaseException as error:  # the whole round failed: each caller gets the error
            outcomes = [error] * len(batch)
        for slot, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                slot.error = outcome
            else:
                slot.result = outcome
            slot.done = True
        with self._lock:
            following = self._waiting[0] if self._waiting else None
            self._running = following is not None
        for slot in batch:
            slot.woken.set()
        if following is not None:
            following.woken.set()
