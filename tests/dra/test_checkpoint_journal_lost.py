"""A journal taken away while the driver runs (its `.log` name invites log cleaners) is written again from
memory before the next change is acknowledged, so a restart still finds every claim (issue 30 item 6).

Each case does to the open journal what a cleaner does, prepares another claim, and reads the folder back
the way a restarted driver does (a fresh Checkpoint on the same path).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from device_plugin.dra_helper.checkpoint.journal import journal_name
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from tests.dra.checkpoint_helpers import claim


def removed(path: Path) -> None:
    path.unlink()


def rotated(path: Path) -> None:  # logrotate's default: renamed aside, a fresh empty file in its place
    os.rename(path, path.with_name(path.name + ".1"))
    path.write_bytes(b"")


def renamed(path: Path) -> None:
    os.rename(path, path.with_name(path.name + ".1"))


def cut_short(path: Path) -> None:  # logrotate's copytruncate
    os.truncate(path, 0)


@pytest.mark.parametrize(
    "clean", [removed, rotated, renamed, cut_short], ids=["removed", "rotated", "renamed", "truncated"]
)
def test_a_journal_taken_away_is_written_again_before_the_next_change_returns(
    tmp_path: Path, clean: Callable[[Path], None], caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put_many({"before-1": claim(1), "before-2": claim(2)})
    assert checkpoint.remove("before-2") is True
    journal = tmp_path / "claims" / journal_name(1)
    clean(journal)
    with caplog.at_level(logging.WARNING):
        checkpoint.put("after", claim(3))
    assert f"{journal.name} was removed, replaced or cut short while in use" in caplog.text
    again = Checkpoint(tmp_path / "checkpoint.json")
    assert again.uids() == ("after", "before-1")
    assert again.get("after") == claim(3) and again.get("before-1") == claim(1)


def test_a_journal_left_alone_is_not_written_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    checkpoint.put("a", claim(1))
    inode = (tmp_path / "claims" / journal_name(1)).stat().st_ino
    with caplog.at_level(logging.WARNING):
        checkpoint.put("b", claim(2))
    assert "written again" not in caplog.text
    assert (tmp_path / "claims" / journal_name(1)).stat().st_ino == inode
    assert Checkpoint(tmp_path / "checkpoint.json").uids() == ("a", "b")


def test_a_journal_removed_twice_is_written_again_each_time(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    for n in range(3):
        checkpoint.put(f"c{n}", claim(n))
        (tmp_path / "claims" / journal_name(1)).unlink()
    checkpoint.put("last", claim(9))
    assert Checkpoint(tmp_path / "checkpoint.json").uids() == ("c0", "c1", "c2", "last")
