"""The DRA checkpoint on disk: each change goes to the journal, compaction makes one file per claim, and a
restart reads back what was there.

A restart replays the journal over the files; a uid that is not a plain token gets a hashed file name inside
the folder; writes leave no temporary files; the old single file is migrated once (a bad claim in it is set
aside); a removed folder is written again at the next change; a dropped checkpoint closes its journal.
Every case uses a real folder under tmp_path and reads the result back the way a restarted driver does
(a fresh Checkpoint on the same path). Hostile files at start are tests/adversarial/dra/.
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import pytest

from device_plugin.dra_helper.checkpoint.format import FORMAT_VERSION, file_name
from device_plugin.dra_helper.checkpoint.journal import journal_name
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from tests.dra.checkpoint_helpers import claim, files


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


@pytest.mark.parametrize("compacted", [False, True], ids=["journal-open", "journal-compacted-away"])
def test_a_removed_folder_is_written_again_with_every_claim_at_the_next_change(tmp_path: Path, compacted: bool) -> None:
    """`rm -rf <kubelet>/plugins` while serving: the claims still prepared must survive a later restart, whether
    the next change finds its journal lost or has to open a new one (after a compaction)."""
    checkpoint = Checkpoint(tmp_path / "plugins" / "d" / "checkpoint.json")
    checkpoint.put_many({"a": claim(1), "b": claim(2)})
    if compacted:
        checkpoint.compact()
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
