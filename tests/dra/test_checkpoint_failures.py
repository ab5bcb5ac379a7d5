"""The DRA checkpoint when a write fails: what was answered with an error is not remembered, and nothing
that was kept is lost.

A failed put is cut off the journal, a failed delete forgets nothing, a failed compaction keeps the journal,
a claim too large to read back is refused, and a claim whose file someone removed is forgotten by its
delete. Every case uses a real folder under tmp_path (the journal's writes or the files' fsync made to fail)
and reads the result back the way a restarted driver does (a fresh Checkpoint on the same path).
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from device_plugin.dra_helper.checkpoint import files as checkpoint_files
from device_plugin.dra_helper.checkpoint.journal import journal_name
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.checkpoint.values import PreparedClaim, PreparedDevice
from tests.dra.checkpoint_helpers import claim, files, journal_writes


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
