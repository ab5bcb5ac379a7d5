"""The checkpoint's group commit (CommitQueue): who is committed in which round, and who gets which error.

Real threads against a commit function that records its rounds; the disk side is tests/dra/test_checkpoint.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from device_plugin.dra.checkpoint_queue import CommitQueue


def run_at_once(queue: CommitQueue[str, str], items: list[str]) -> dict[str, str | BaseException]:
    """submit() each item from its own thread, all released together; item -> result or exception."""
    outcomes: dict[str, str | BaseException] = {}
    start = threading.Barrier(len(items))

    def submit(item: str) -> None:
        start.wait()
        try:
            outcomes[item] = queue.submit(item)
        except Exception as error:
            outcomes[item] = error

    threads = [threading.Thread(target=submit, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_callers_that_arrive_during_a_round_share_the_next_one_in_submission_order() -> None:
    rounds: list[list[str]] = []

    def commit(items: Sequence[str]) -> list[str]:
        rounds.append(list(items))
        time.sleep(0.1)  # a slow fdatasync: everyone else queues meanwhile
        return [f"ok {item}" for item in items]

    queue: CommitQueue[str, str] = CommitQueue(commit)
    items = [f"i{n}" for n in range(12)]
    assert run_at_once(queue, items) == {item: f"ok {item}" for item in items}
    assert sorted(item for batch in rounds for item in batch) == sorted(items)  # each committed exactly once
    assert queue.rounds == len(rounds) <= 3


def test_an_item_that_fails_alone_fails_only_its_caller() -> None:
    """One claim's own problem (too large to checkpoint) must not fail the claims it shares a round with."""

    def commit(items: Sequence[str]) -> list[str | BaseException]:
        time.sleep(0.05)
        return [OSError(27, f"{item} too large") if item == "bad" else f"ok {item}" for item in items]

    queue: CommitQueue[str, str] = CommitQueue(commit)
    outcomes = run_at_once(queue, ["a", "bad", "b", "c"])
    assert isinstance(outcomes.pop("bad"), OSError)
    assert outcomes == {"a": "ok a", "b": "ok b", "c": "ok c"}


@pytest.mark.parametrize(
    "broken",
    [lambda items: (_ for _ in ()).throw(OSError(5, "Input/output error")), lambda items: []],
    ids=["the-commit-raises", "the-commit-answers-too-few-outcomes"],
)
def test_a_round_that_fails_fails_each_of_its_callers_and_the_next_round_runs(broken: object) -> None:
    calls = 0

    def commit(items: Sequence[str]) -> list[str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            return broken(items)  # type: ignore[operator,no-any-return]
        return [f"ok {item}" for item in items]

    queue: CommitQueue[str, str] = CommitQueue(commit)
    with pytest.raises((OSError, RuntimeError)):
        queue.submit("first")
    assert queue.submit("second") == "ok second"
