"""The DRA checkpoint: one file per claim, batches, group commit, failures, migration from the old single file.

Every case uses a real folder under tmp_path and reads the result back the way a restarted driver does
(a fresh Checkpoint on the same path). Hostile files at start are tests/adversarial/dra/.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from device_plugin.dra import checkpoint_files
from device_plugin.dra.checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from device_plugin.dra.checkpoint_commit import GroupSync
from device_plugin.dra.checkpoint_format import FORMAT_VERSION, file_name


def claim(i: int) -> PreparedClaim:
    device = PreparedDevice(("gpus",), "node-a", f"gpu-{i % 8}", (f"nvidia.com/gpu=GPU-{i:08x}",))
    return PreparedClaim("ns", f"c{i}", (device,))


def files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def test_a_claim_is_one_file_named_for_its_uid_and_read_back_after_a_restart(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    uid = "0b4f6c1e-8d3a-4f5b-9c2e-123456789abc"
    checkpoint.put(uid, claim(3))
    assert files(tmp_path) == ["claims"] and files(tmp_path / "claims") == [f"{uid}.json"]
    body = json.loads((tmp_path / "claims" / f"{uid}.json").read_text())
    assert body["version"] == FORMAT_VERSION and body["uid"] == uid
    again = Checkpoint(tmp_path / "checkpoint.json")
    assert again.get(uid) == claim(3) and again.uids() == (uid,)


def test_writes_and_removes_leave_no_temporary_files(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    for i in range(5):
        checkpoint.put(f"u{i}", claim(i))
    assert checkpoint.remove("u0") is True
    assert checkpoint.remove("u0") is False
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
    ["a/b", "../escape", ".tmp-x", "x.bad", "", "é" * 10, "a" * 300],
    ids=["slash", "dot-dot", "temp-prefix", "bad-suffix", "empty", "non-ascii", "longer-than-a-file-name"],
)
def test_a_uid_that_is_not_a_plain_token_gets_a_hashed_name_inside_the_folder(tmp_path: Path, uid: str) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put(uid, claim(1))
    assert files(tmp_path / "claims") == [file_name(uid)] and file_name(uid).startswith("_")
    assert Checkpoint(tmp_path / "checkpoint.json").get(uid) == claim(1)


def test_a_failed_put_many_is_not_remembered_and_puts_back_what_it_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Otherwise a claim answered with an error would be found, prepared, after a restart."""
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put("kept", claim(1))
    real_replace = os.replace

    def disk_full_for_u7(src: str | Path, dst: str | Path) -> None:
        if Path(dst).name == "u7.json":
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(checkpoint_files.os, "replace", disk_full_for_u7)
    with pytest.raises(OSError, match="No space"):
        checkpoint.put_many({"kept": claim(2), **{f"u{i}": claim(i) for i in range(10)}})
    monkeypatch.undo()
    assert checkpoint.uids() == ("kept",) == Checkpoint(tmp_path / "checkpoint.json").uids()
    assert checkpoint.get("kept") == claim(1) == Checkpoint(tmp_path / "checkpoint.json").get("kept")
    assert files(tmp_path / "claims") == ["kept.json"]


@pytest.mark.parametrize("uid", ["new", "kept"], ids=["a-new-claim", "a-claim-replaced"])
def test_a_failed_fsync_leaves_the_folder_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uid: str) -> None:
    """A new claim's file is renamed into place before its fsync: a failed fsync must take it away again;
    a replacement is fsynced before its rename, so the old content stays."""
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put("kept", claim(1))

    def io_error(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(checkpoint_files.os, "fsync", io_error)
    with pytest.raises(OSError, match="Input/output"):
        checkpoint.put(uid, claim(2))
    monkeypatch.undo()
    assert files(tmp_path / "claims") == ["kept.json"]
    again = Checkpoint(tmp_path / "checkpoint.json")
    assert again.uids() == ("kept",) == checkpoint.uids() and again.get("kept") == claim(1)


def test_a_failed_delete_forgets_only_the_claims_whose_files_are_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put_many({"a": claim(1), "b": claim(2)})
    real_unlink = os.unlink

    def busy_for_b(path: str | Path, *args: object, **kwargs: object) -> None:
        if Path(path).name == "b.json":
            raise OSError(16, "Device or resource busy")
        real_unlink(path)

    monkeypatch.setattr(checkpoint_files.os, "unlink", busy_for_b)
    with pytest.raises(OSError, match="busy"):
        checkpoint.delete_many(["a", "b"])
    monkeypatch.undo()
    assert checkpoint.uids() == ("b",) == Checkpoint(tmp_path / "checkpoint.json").uids()


def test_a_claim_whose_file_someone_removed_is_forgotten_by_its_delete(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put_many({"a": claim(1), "b": claim(2)})
    (tmp_path / "claims" / "a.json").unlink()
    assert checkpoint.delete_many(["a"]) == {"a"} and checkpoint.uids() == ("b",)


def test_concurrent_puts_share_directory_fsyncs(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    real_sync = checkpoint.folder.sync

    def slow_sync() -> None:  # a slow disk: the puts that arrive meanwhile must wait for one more, not one each
        time.sleep(0.2)
        real_sync()

    checkpoint._group._sync = slow_sync  # type: ignore[method-assign]
    before, writers = checkpoint.syncs, 16
    start = threading.Barrier(writers)

    def put(i: int) -> None:
        start.wait()
        checkpoint.put(f"u{i}", claim(i))

    threads = [threading.Thread(target=put, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(Checkpoint(tmp_path / "checkpoint.json")) == writers
    assert checkpoint.syncs - before < writers // 2


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
