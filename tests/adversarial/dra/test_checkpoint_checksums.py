"""A checkpoint entry torn or edited into other valid JSON is caught by its checksum (issue 34): that one
claim is set aside (its file renamed `.bad`, named in the log) and the others load. Entries the release
before wrote, without a checksum, still load (the upgrade path).

Each case writes a real folder with a Checkpoint, changes bytes on disk, and starts again the way the
driver does (a fresh Checkpoint on the same path).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from device_plugin.dra_helper.checkpoint.journal import journal_name
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from tests.dra.checkpoint_helpers import claim, files

FLIPS = [  # (what is changed in the victim's bytes, into what): each leaves JSON of the right shape
    (b'"gpu-1"', b'"gpu-7"'),  # a device name: a GPU the claim does not hold
    (b'"ns"', b'"nt"'),  # the namespace
    (b'"crc32":"', b'"crc33":"'),  # the checksum's own key: not taken for an old entry
    (b"false", b"true "),  # adminAccess granted by an edit
]
FLIP_IDS = ["device-name", "namespace", "checksum-key", "admin-access"]


def flipped(path: Path, old: bytes, new: bytes, *, uid: str = "victim") -> None:
    """`old` changed into `new` in the entry (the file, or its journal line) of claim `uid`."""
    lines = path.read_bytes().split(b"\n")
    [at] = [n for n, line in enumerate(lines) if json.loads(line or b"{}").get("uid") == uid][-1:]
    assert old in lines[at]
    lines[at] = lines[at].replace(old, new, 1)
    path.write_bytes(b"\n".join(lines))


def compacted_with(tmp_path: Path, uids: list[str]) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put_many({uid: claim(n) for n, uid in enumerate(uids)})
    checkpoint.compact()


@pytest.mark.parametrize(("old", "new"), FLIPS, ids=FLIP_IDS)
def test_a_claim_file_edited_is_set_aside_and_the_others_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, old: bytes, new: bytes
) -> None:
    compacted_with(tmp_path, ["a", "victim", "z"])
    flipped(tmp_path / "claims" / "victim.json", old, new)
    with caplog.at_level(logging.WARNING):
        again = Checkpoint(tmp_path / "checkpoint.json")
    assert again.uids() == ("a", "z") and again.get("a") == claim(0)
    assert files(tmp_path / "claims") == ["a.json", "victim.json.bad", "z.json"]
    assert "victim.json" in caplog.text and "set aside as victim.json.bad" in caplog.text


@pytest.mark.parametrize(("old", "new"), FLIPS, ids=FLIP_IDS)
def test_a_journal_record_edited_sets_its_claim_aside_and_the_others_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, old: bytes, new: bytes
) -> None:
    compacted_with(tmp_path, ["victim"])  # an older file of the victim: set aside with it
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put("a", claim(0))
    checkpoint.put("victim", claim(1))
    checkpoint.put("z", claim(2))
    journal = tmp_path / "claims" / journal_name(1)  # the first journal was compacted and removed
    flipped(journal, old, new)  # the victim's record, the journal's second
    with caplog.at_level(logging.WARNING):
        again = Checkpoint(tmp_path / "checkpoint.json")
    assert again.uids() == ("a", "z") and again.get("z") == claim(2)
    assert "claim victim has a bad record in journal-00000001.log; set aside (its older file as victim.json.bad)" in (
        caplog.text
    )
    again.compact()
    assert files(tmp_path / "claims") == ["a.json", f"{journal.name}.bad", "victim.json.bad", "z.json"]
    assert Checkpoint(tmp_path / "checkpoint.json").uids() == ("a", "z")


def test_a_later_good_record_settles_a_claim_whose_record_was_bad(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put("victim", claim(1))
    checkpoint.put("other", claim(2))
    journal = tmp_path / "claims" / journal_name(1)
    flipped(journal, b'"gpu-1"', b'"gpu-7"')  # the victim's only record so far
    checkpoint.put("victim", claim(5))
    assert Checkpoint(tmp_path / "checkpoint.json").uids() == ("other", "victim")
    assert Checkpoint(tmp_path / "checkpoint.json").get("victim") == claim(5)


def test_entries_without_a_checksum_from_the_release_before_still_load(tmp_path: Path) -> None:
    """The release before wrote the same entries less the "crc32" key: files, put and delete records."""

    def old_release(entry: dict[str, object]) -> bytes:
        return json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()

    compacted_with(tmp_path, ["kept", "deleted", "changed"])
    folder = tmp_path / "claims"
    bodies = {name: json.loads((folder / f"{name}.json").read_bytes()) for name in ("kept", "deleted", "changed")}
    for name, body in bodies.items():
        del body["crc32"]
        (folder / f"{name}.json").write_bytes(old_release(body))
    changed = bodies["changed"]
    changed["claim"]["name"] = "c-new"
    records = [old_release({"version": 2, "uid": "deleted", "deleted": True}), old_release(changed)]
    (folder / journal_name(1)).write_bytes(b"\n".join(records) + b"\n")
    again = Checkpoint(tmp_path / "checkpoint.json")
    assert again.uids() == ("changed", "kept")
    assert again.get("kept") == claim(0) and again.get("changed").name == "c-new"  # type: ignore[union-attr]
    assert not [name for name in files(folder) if name.endswith(".bad")]
