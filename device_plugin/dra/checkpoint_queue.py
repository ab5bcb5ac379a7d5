"""Group commit: whoever asks while a commit runs is committed with everyone else waiting, in one round.

Boundary: who commits what, and when; no disk, no claims. A caller submits one item and blocks until
the round that carried it has finished. The first caller that finds no round running becomes the
leader: it takes every item queued at that moment (from any thread, any request), hands them to
`commit` in the order they were submitted, and wakes their callers; callers that arrive meanwhile
queue for the next round, whose leader is one of them. No thread of its own, so nothing to start or
stop, and no pool to deadlock: every round runs on a caller's thread. `commit` returns one outcome per
item, so an item can fail alone (a result, or an exception that only its caller gets); an exception
raised by `commit` itself fails every item of its round.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class _Slot(Generic[T]):
    item: T
    done: bool = False
    result: object = None
    error: BaseException | None = None


class CommitQueue(Generic[T, R]):
    def __init__(self, commit: Callable[[Sequence[T]], Sequence[R | BaseException]]) -> None:
        self._commit = commit
        self._cond = threading.Condition()
        self._waiting: list[_Slot[T]] = []
        self._running = False
        self.rounds = 0  # commits run: fewer than items when callers overlap

    def submit(self, item: T) -> R:
        """`item`'s outcome, once the round that carried it has been committed (its exception raised)."""
        slot = _Slot(item)
        with self._cond:
            self._waiting.append(slot)
            while not slot.done:
                if self._running:
                    self._cond.wait()
                else:
                    self._lead()
        if slot.error is not None:
            raise slot.error
        return slot.result  # type: ignore[return-value]

    def _lead(self) -> None:
        """Commit every waiting item (called with the condition held; released while committing)."""
        batch, self._waiting = self._waiting, []
        self._running = True
        self.rounds += 1
        self._cond.release()
        try:
            outcomes: Sequence[R | BaseException] = self._commit([slot.item for slot in batch])
            if len(outcomes) != len(batch):
                raise RuntimeError(f"commit answered {len(outcomes)} outcomes for {len(batch)} items")
        except BaseException as error:  # the whole round failed: each caller gets the error
            outcomes = [error] * len(batch)
        finally:
            self._cond.acquire()
            self._running = False
        for slot, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                slot.error = outcome
            else:
                slot.result = outcome
            slot.done = True
        self._cond.notify_all()
