"""The checkpoint's group commit (CommitQueue): who is committed in which round, and who gets which error.

Real threads against a commit function that records its rounds; the disk side is tests/dra/test_checkpoint_*.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from device_plugin.dra_helper.checkpoint.group_commit import CommitQueue


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


def test_the_lead_is_passed_on_after_a_failed_round_so_no_caller_is_left_waiting() -> None:
    """Callers queued behind a round whose disk write failed are committed by the next leader."""
    rounds: list[list[str]] = []
    queue: CommitQueue[str, str]

    def commit(items: Sequence[str]) -> list[str]:
        rounds.append(list(items))
        if len(rounds) == 1:  # the others queue up behind this round, then it fails
            deadline = time.monotonic() + 10
            while len(queue._waiting) < 11 and time.monotonic() < deadline:
                time.sleep(0.01)
            raise OSError(5, "Input/output error")
        return [f"ok {item}" for item in items]

    queue = CommitQueue(commit)
    first: list[BaseException] = []
    leader = threading.Thread(target=lambda: first.append(_error_of(queue, "first")))
    leader.start()
    while not rounds:
        time.sleep(0.01)
    outcomes = run_at_once(queue, [f"i{n}" for n in range(11)])
    leader.join()
    assert rounds[0] == ["first"] and isinstance(first[0], OSError)
    assert outcomes == {f"i{n}": f"ok i{n}" for n in range(11)}  # none left waiting, none given its error


def _error_of(queue: CommitQueue[str, str], item: str) -> BaseException:
    try:
        queue.submit(item)
    except OSError as error:
        return error
    raise AssertionError(f"{item} was committed")
