"""The DRA checkpoint: the journal, its compaction into one file per claim, group commit, failures, migration.

Every case uses a real folder under tmp_path and reads the result back the way a restarted driver does
(a fresh Checkpoint on the same path). Hostile files at start are tests/adversarial/dra/.
"""

from __future__ import annotations

import errno
import gc
import json
import os
import threading
import time
from pathlib import Path

import pytest

from device_plugin.dra import checkpoint as checkpoint_module
from device_plugin.dra import checkpoint_files, checkpoint_journal
from device_plugin.dra.checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from device_plugin.dra.checkpoint_commit import GroupSync
from device_plugin.dra.checkpoint_format import FORMAT_VERSION, file_name
from device_plugin.dra.checkpoint_journal import journal_name


def claim(i: int) -> PreparedClaim:
    device = PreparedDevice(("gpus",), "node-a", f"gpu-{i % 8}", (f"nvidia.com/gpu=GPU-{i:08x}",))
    return PreparedClaim("ns", f"c{i}", (device,))


def files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def test_a_change_goes_to_the_journal_and_compaction_makes_it_one_file_named_for_its_uid(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    uid = "0b4f6c1e-8d3a-4f5b-9c2e-123456789abc"
    checkpoint.put(uid, claim(3))
    assert files(tmp_path) == ["claims"] and files(tmp_path / "claims") == [journal_name(1)]
    checkpoint.compact()
    assert files(tmp_path / "claims") == [f"{uid}.json"]
    body = json.loads((tmp_path / "claims" / f"{uid}.json").read_text())
    assert body["version"] == FORMAT_VERSION and body["uid"] == uid
    again = Checkpoint(tmp_path / "checkpoint.json")
    assert again.get(uid) == claim(3) and again.uids() == (uid,)


def test_a_restart_replays_the_journal_over_the_files_and_can_compact_it(tmp_path: Path) -> None:
    """An Unprepare that succeeded stays effective: its delete record wins over the older file."""
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put_many({"gone": claim(1), "changed": claim(2), "kept": claim(3)})
    checkpoint.compact()
    assert checkpoint.remove("gone") is True
    checkpoint.put("changed", claim(20))
    checkpoint.put("new", claim(4))
    assert journal_name(2) in files(tmp_path / "claims")  # not compacted: the restart must replay it
    again = Checkpoint(tmp_path / "checkpoint.json")
    assert again.uids() == ("changed", "kept", "new") and again.get("changed") == claim(20)
    again.compact()
    assert files(tmp_path / "claims") == ["changed.json", "kept.json", "new.json"]


def test_writes_and_removes_leave_no_temporary_files(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    for i in range(5):
        checkpoint.put(f"u{i}", claim(i))
    assert checkpoint.remove("u0") is True
    assert checkpoint.remove("u0") is False
    checkpoint.compact()
    assert files(tmp_path / "claims") == [f"u{i}.json" for i in range(1, 5)]
    assert Checkpoint(tmp_path / "checkpoint.json").uids() == ("u1", "u2", "u3", "u4")


def test_put_many_and_delete_many_change_only_their_own_claims(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put("other", claim(99))
    checkpoint.put_many({f"u{i}": claim(i) for i in range(50)})
    assert len(checkpoint) == 51
    assert checkpoint.delete_many([f"u{i}" for i in range(0, 50, 2)] + ["never"]) == {f"u{i}" for i in range(0, 50, 2)}
    expected = sorted(["other", *(f"u{i}" for i in range(1, 50, 2))])
    assert list(checkpoint.uids()) == expected == list(Checkpoint(tmp_path / "checkpoint.json").uids())
    assert checkpoint.get("u1") == claim(1) and checkpoint.get("u2") is None


@pytest.mark.parametrize(
    "uid",
    ["a/b", "../escape", ".tmp-x", "x.bad", "journal-00000009.log", "", "é" * 10, "a" * 300],
    ids=["slash", "dot-dot", "temp-prefix", "bad-suffix", "a-journal-name", "empty", "non-ascii", "long"],
)
def test_a_uid_that_is_not_a_plain_token_gets_a_hashed_name_inside_the_folder(tmp_path: Path, uid: str) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put(uid, claim(1))
    checkpoint.compact()
    assert files(tmp_path / "claims") == [file_name(uid)] and file_name(uid).startswith("_")
    assert Checkpoint(tmp_path / "checkpoint.json").get(uid) == claim(1)


def journal_writes(monkeypatch: pytest.MonkeyPatch, *, failures: int = 0, delay_s: float = 0.0) -> None:
    """The journal's next `failures` writes fail with EIO; each write to a journal takes `delay_s` more
    (a slow disk). Other writes of the process are left alone."""
    real, left = os.write, [failures]

    def write(fd: int, data: bytes | memoryview) -> int:
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith("journal-"):
            time.sleep(delay_s)
            if left[0] > 0:
                left[0] -= 1
                raise OSError(5, "Input/output error")
        return real(fd, data)

    monkeypatch.setattr(checkpoint_journal.os, "write", write)


def test_a_failed_put_is_not_remembered_and_is_cut_off_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Otherwise a claim answered with an error would be found, prepared, after a restart."""
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put("kept", claim(1))
    journal_writes(monkeypatch, failures=1)
    with pytest.raises(OSError, match="Input/output"):
        checkpoint.put_many({"kept": claim(2), **{f"u{i}": claim(i) for i in range(10)}})
    checkpoint.put("after", claim(5))  # the journal goes on after the failed round
    monkeypatch.undo()
    again = Checkpoint(tmp_path / "checkpoint.json")
    assert checkpoint.uids() == ("after", "kept") == again.uids()
    assert checkpoint.get("kept") == claim(1) == again.get("kept")


def test_a_failed_delete_forgets_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Unprepare is answered with an error and retried; the claims stay prepared meanwhile."""
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put_many({"a": claim(1), "b": claim(2)})
    journal_writes(monkeypatch, failures=1)
    with pytest.raises(OSError, match="Input/output"):
        checkpoint.delete_many(["a", "b"])
    monkeypatch.undo()
    assert checkpoint.uids() == ("a", "b") == Checkpoint(tmp_path / "checkpoint.json").uids()


@pytest.mark.parametrize("uid", ["new", "kept"], ids=["a-new-claim", "a-claim-replaced"])
def test_a_failed_compaction_keeps_the_journal_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uid: str
) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put("kept", claim(1))
    checkpoint.compact()
    checkpoint.put(uid, claim(2))

    def io_error(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(checkpoint_files.os, "fsync", io_error)
    with pytest.raises(OSError, match="Input/output"):
        checkpoint.compact()
    monkeypatch.undo()
    assert journal_name(2) in files(tmp_path / "claims")
    again = Checkpoint(tmp_path / "checkpoint.json")
    assert again.uids() == checkpoint.uids() and again.get(uid) == claim(2)


def test_a_claim_too_large_to_read_back_is_refused_and_not_remembered(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    device = PreparedDevice(("gpus",), "node-a", "gpu-0", tuple(f"nvidia.com/gpu=GPU-{i:060x}" for i in range(2000)))
    with pytest.raises(OSError, match="at most") as raised:
        checkpoint.put_many({"small": claim(1), "huge": PreparedClaim("ns", "c", (device,))})
    assert raised.value.errno == errno.EFBIG
    assert checkpoint.uids() == () == Checkpoint(tmp_path / "checkpoint.json").uids()


def test_a_claim_whose_file_someone_removed_is_forgotten_by_its_delete(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put_many({"a": claim(1), "b": claim(2)})
    checkpoint.compact()
    (tmp_path / "claims" / "a.json").unlink()
    assert checkpoint.delete_many(["a"]) == {"a"} and checkpoint.uids() == ("b",)
    assert Checkpoint(tmp_path / "checkpoint.json").uids() == ("b",)


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


def test_the_old_single_file_is_migrated_once_and_removed(tmp_path: Path) -> None:
    legacy = tmp_path / "checkpoint.json"
    old = {
        f"u{i}": {
            "namespace": "ns",
            "name": f"c{i}",
            "devices": [
                {
                    "request_names": ["gpus"],
                    "pool_name": "node-a",
                    "device_name": f"gpu-{i % 8}",
                    "cdi_device_ids": [f"nvidia.com/gpu=GPU-{i:08x}"],
                }
            ],
        }
        for i in range(20)
    }
    legacy.write_text(json.dumps({"version": 1, "claims": old}))
    (tmp_path / ".checkpoint-abc123").write_text("{half a")  # the old format's temp file after a kill -9
    checkpoint = Checkpoint(legacy)
    assert checkpoint.uids() == tuple(sorted(old)) and checkpoint.get("u3") == claim(3)
    assert files(tmp_path) == ["claims"]
    assert Checkpoint(legacy).uids() == tuple(sorted(old))


def test_an_old_file_with_one_bad_claim_migrates_the_others_and_is_set_aside(tmp_path: Path) -> None:
    legacy = tmp_path / "checkpoint.json"
    good = {"namespace": "ns", "name": "c", "devices": []}
    legacy.write_text(json.dumps({"version": 1, "claims": {"good": good, "bad": {"namespace": 7}}}))
    assert Checkpoint(legacy).uids() == ("good",)
    assert files(tmp_path) == ["checkpoint.json.bad", "claims"]


def test_a_removed_folder_is_written_again_with_every_claim_at_the_next_change(tmp_path: Path) -> None:
    """`rm -rf <kubelet>/plugins` while serving: the claims still prepared must survive a later restart."""
    checkpoint = Checkpoint(tmp_path / "plugins" / "d" / "checkpoint.json")
    checkpoint.put_many({"a": claim(1), "b": claim(2)})
    for path in (tmp_path / "plugins" / "d" / "claims").iterdir():
        path.unlink()
    (tmp_path / "plugins" / "d" / "claims").rmdir()
    (tmp_path / "plugins" / "d").rmdir()
    checkpoint.put("c", claim(3))
    assert Checkpoint(tmp_path / "plugins" / "d" / "checkpoint.json").uids() == ("a", "b", "c")


def test_a_checkpoint_dropped_without_closing_leaves_its_journal_closed(tmp_path: Path) -> None:
    """A driver restarted inside one process (tests, a re-created front-end) must not pile up open journals."""
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put("u", claim(1))
    journal = str(tmp_path / "claims" / journal_name(1))

    def open_files() -> set[str]:
        paths = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                paths.add(os.readlink(f"/proc/self/fd/{fd}"))
            except FileNotFoundError:  # the listing's own descriptor, closed by now
                continue
        return paths

    assert journal in open_files()
    del checkpoint
    gc.collect()
    assert journal not in open_files()
