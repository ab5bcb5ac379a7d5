"""The DRA checkpoint under concurrent callers: group commit and compaction in the background.

Concurrent puts share journal rounds on a slow disk; changes racing background compactions are all found
after a restart; GroupSync answers each caller after an fsync that began after its call, and gives every
caller its own error when the fsync fails. Real threads, a real folder under tmp_path; the commit queue
alone (without the disk) is tests/dra/test_checkpoint_queue.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from device_plugin.dra_helper.checkpoint import store as checkpoint_module
from device_plugin.dra_helper.checkpoint.commit import GroupSync
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from tests.dra.checkpoint_helpers import claim, files, journal_writes


def test_concurrent_puts_share_journal_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    journal_writes(monkeypatch, delay_s=0.2)  # a slow disk: the puts that arrive meanwhile wait for one more round
    writers = 16
    start = threading.Barrier(writers)

    def put(i: int) -> None:
        start.wait()
        checkpoint.put(f"u{i}", claim(i))

    threads = [threading.Thread(target=put, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    monkeypatch.undo()
    assert len(Checkpoint(tmp_path / "checkpoint.json")) == writers
    assert checkpoint.rounds < writers // 2


def test_changes_racing_background_compactions_are_all_found_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compaction closes the journal, then reads the map: a change made meanwhile is in the next journal."""
    monkeypatch.setattr(checkpoint_module, "COMPACT_AFTER_BYTES", 2000)  # a compaction every ~10 changes
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")

    def churn(worker: int) -> None:
        for i in range(60):
            uid = f"w{worker}-{i % 7}"
            if i % 3 == 2:
                checkpoint.remove(uid)
            else:
                checkpoint.put(uid, claim(worker * 100 + i))

    threads = [threading.Thread(target=churn, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert any(name.endswith(".json") for name in files(tmp_path / "claims"))  # compactions ran meanwhile
    expected = {uid: checkpoint.get(uid) for uid in checkpoint.uids()}
    again = Checkpoint(tmp_path / "checkpoint.json")
    assert {uid: again.get(uid) for uid in again.uids()} == expected and expected


def test_group_sync_answers_each_caller_after_an_fsync_that_began_after_its_call() -> None:
    log: list[tuple[str, int]] = []
    calls = 0
    lock = threading.Lock()

    def sync() -> None:
        with lock:
            log.append(("begin", calls))
        time.sleep(0.01)

    group = GroupSync(sync)

    def caller() -> None:
        nonlocal calls
        with lock:
            calls += 1
            mine = calls
        group.sync()
        with lock:  # some fsync that began after this call was made (calls >= mine) has finished
            assert any(kind == "begin" and seen >= mine for kind, seen in log)

    threads = [threading.Thread(target=caller) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 1 <= group.syncs <= 12


def test_group_sync_gives_every_caller_its_own_error_when_the_fsync_fails() -> None:
    def failing() -> None:
        time.sleep(0.01)
        raise OSError(5, "Input/output error")

    group = GroupSync(failing)
    errors: list[BaseException] = []

    def caller() -> None:
        try:
            group.sync()
        except OSError as error:
            errors.append(error)

    threads = [threading.Thread(target=caller) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(errors) == 5 and group.syncs == 5
