"""A hostile or broken DRA checkpoint at start: refused fast, set aside as `.bad`, logged, never fatal.

Reproduces issue 18 item 6 (and the temp files of item 5): on the single-file checkpoint a FIFO hung
start-up with no log line, a symlink to /dev/zero grew to 1.5 GiB, `[` x 100,000 ended in a
RecursionError traceback, any malformed file stopped the driver from starting, and `.checkpoint-*`
temp files left by kill -9 stayed forever. Each case loads the checkpoint the way the driver does at
start (Checkpoint(path)) in a helper thread, so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from device_plugin.dra_helper.checkpoint.format import MAX_ENTRY_BYTES, encode
from device_plugin.dra_helper.checkpoint.journal import MAX_JOURNAL_BYTES, delete_record, journal_name
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.checkpoint.values import PreparedClaim
from tests.adversarial.dra.harness import DRIVER, HeldClaims, dra_server, prepare, unprepare, wait_until

HANG_GUARD_S = 20.0  # not a performance bound: a hang fails the test instead of stopping the suite
GOOD = PreparedClaim("ns", "good", ())


def started_within_guard(path: Path) -> Checkpoint:
    """Checkpoint(path), in a thread: fails if it hangs or raises."""
    result: list[Checkpoint | BaseException] = []

    def load() -> None:
        try:
            result.append(Checkpoint(path))
        except BaseException as error:  # reported below, whatever it is
            result.append(error)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    assert result, f"loading the checkpoint hung for {HANG_GUARD_S} s"
    assert isinstance(result[0], Checkpoint), f"loading the checkpoint raised {result[0]!r}"
    return result[0]


def written_as_a_file(path: Path) -> None:
    """Claim "good" checkpointed and compacted into good.json (no journal left)."""
    checkpoint = Checkpoint(path)
    checkpoint.put("good", GOOD)
    checkpoint.compact()


def fifo(path: Path) -> None:
    os.mkfifo(path)


def dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def text(content: str | bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    return write


ENTRY_CASES = [
    ("a-fifo", fifo, "FIFO"),
    ("a-symlink-to-dev-zero", dev_zero, "symbolic link"),
    ("60000-open-brackets", text("[" * 60_000), "nested deeper"),
    ("100000-open-brackets", text("[" * 100_000), "larger than"),
    ("33-levels", text("[" * 33 + "]" * 33), "nested deeper"),
    ("larger-than-the-cap", text(" " * (MAX_ENTRY_BYTES + 1)), "larger than"),
    ("not-json", text("{half a"), "not valid JSON"),
    ("not-utf8", text(b"\xff\xfe{}"), "UTF-8"),
    ("a-list", text("[]"), "expected a mapping"),
    ("wrong-version", text('{"version": 9}'), "version"),
    (
        "devices-a-string",
        text('{"version": 2, "uid": "x", "claim": {"namespace": "ns", "name": "n", "devices": "gpu"}}'),
        "devices",
    ),
    ("named-for-another-claim", text(encode("someone-else", GOOD).decode()), "another claim"),
    ("a-directory", lambda p: p.mkdir(), "directory"),
]


@pytest.mark.parametrize(("case", "make", "why"), ENTRY_CASES, ids=[c[0] for c in ENTRY_CASES])
def test_a_bad_claim_file_is_set_aside_and_logged_and_the_others_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, case: str, make: Callable[[Path], None], why: str
) -> None:
    written_as_a_file(tmp_path / "checkpoint.json")
    make(tmp_path / "claims" / "victim.json")
    with caplog.at_level(logging.WARNING):
        checkpoint = started_within_guard(tmp_path / "checkpoint.json")
    assert checkpoint.uids() == ("good",)
    assert sorted(p.name for p in (tmp_path / "claims").iterdir()) == ["good.json", "victim.json.bad"]
    assert any("victim.json" in r.getMessage() and why in r.getMessage() for r in caplog.records), caplog.text
    assert all(len(r.getMessage()) < 600 for r in caplog.records)


def sparse(size: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        with path.open("wb") as file:
            file.truncate(size)

    return make


JOURNAL_CASES = [
    ("a-fifo", fifo, "FIFO"),
    ("a-symlink-to-dev-zero", dev_zero, "symbolic link"),
    ("larger-than-the-cap", sparse(MAX_JOURNAL_BYTES + 1), "larger than"),
]


@pytest.mark.parametrize(("case", "make", "why"), JOURNAL_CASES, ids=[c[0] for c in JOURNAL_CASES])
def test_a_journal_that_is_not_a_readable_file_is_set_aside_and_the_others_replay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, case: str, make: Callable[[Path], None], why: str
) -> None:
    Checkpoint(tmp_path / "checkpoint.json").put("good", GOOD)  # journal 1, not compacted
    make(tmp_path / "claims" / journal_name(7))
    with caplog.at_level(logging.WARNING):
        checkpoint = started_within_guard(tmp_path / "checkpoint.json")
    assert checkpoint.uids() == ("good",)
    checkpoint.compact()
    assert sorted(p.name for p in (tmp_path / "claims").iterdir()) == ["good.json", f"{journal_name(7)}.bad"]
    assert any(journal_name(7) in r.getMessage() and why in r.getMessage() for r in caplog.records), caplog.text


def test_bad_journal_lines_are_skipped_and_counted_and_a_torn_last_line_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A torn last line is a batch a crash cut short: nobody was answered for it."""
    good = [encode(f"u{i}", GOOD) + b"\n" for i in range(3)]
    bad = [b"[" * 60_000 + b"\n", b"{half a\n", b'{"version": 2, "uid": 7, "deleted": true}\n', b"\xff\n"]
    (tmp_path / "claims").mkdir()
    journal = good[0] + bad[0] + good[1] + b"".join(bad[1:]) + delete_record("u0") + good[2] + b'{"version": 2, "ui'
    (tmp_path / "claims" / journal_name(3)).write_bytes(journal)
    with caplog.at_level(logging.WARNING):
        checkpoint = started_within_guard(tmp_path / "checkpoint.json")
    assert checkpoint.uids() == ("u1", "u2")
    checkpoint.compact()
    listing = sorted(p.name for p in (tmp_path / "claims").iterdir())
    assert listing == [f"{journal_name(3)}.bad", "u1.json", "u2.json"]  # compacted; the bad lines' journal kept
    assert "has 4 bad records (skipped)" in caplog.text and "torn record" in caplog.text


LEGACY_CASES = [
    ("a-fifo", fifo),
    ("a-symlink-to-dev-zero", dev_zero),
    ("100000-open-brackets", text("[" * 100_000)),
    ("not-json", text("{not json")),
    ("a-list", text("[]")),
    ("no-claims", text('{"version": 1}')),
    ("claims-a-list", text('{"version": 1, "claims": []}')),
]


@pytest.mark.parametrize(("case", "make"), LEGACY_CASES, ids=[c[0] for c in LEGACY_CASES])
def test_a_bad_old_single_file_is_set_aside_and_the_driver_starts_empty(
    tmp_path: Path, case: str, make: Callable[[Path], None]
) -> None:
    make(tmp_path / "checkpoint.json")
    checkpoint = started_within_guard(tmp_path / "checkpoint.json")
    assert checkpoint.uids() == ()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json.bad", "claims"]
    checkpoint.put("after", GOOD)  # and it works
    assert Checkpoint(tmp_path / "checkpoint.json").uids() == ("after",)


@pytest.mark.parametrize(
    ("case", "make"),
    [("a-regular-file", text("x")), ("a-fifo", fifo), ("a-symlink-to-dev-zero", dev_zero)],
    ids=["a-regular-file", "a-fifo", "a-symlink-to-dev-zero"],
)
def test_a_claims_folder_that_is_not_a_directory_is_set_aside(
    tmp_path: Path, case: str, make: Callable[[Path], None]
) -> None:
    make(tmp_path / "claims")
    checkpoint = started_within_guard(tmp_path / "checkpoint.json")
    checkpoint.put("after", GOOD)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claims", "claims.bad"]
    assert Checkpoint(tmp_path / "checkpoint.json").uids() == ("after",)


def test_temp_files_left_by_a_killed_write_are_removed_at_start(tmp_path: Path) -> None:
    written_as_a_file(tmp_path / "checkpoint.json")
    (tmp_path / "claims" / ".tmp-good.json-0badf00d").write_text('{"version": 2')
    (tmp_path / ".checkpoint-k1ll9").write_text('{"version": 1, "cla')  # the old format's
    started_within_guard(tmp_path / "checkpoint.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claims"]
    assert sorted(p.name for p in (tmp_path / "claims").iterdir()) == ["good.json"]


def test_many_bad_entries_are_logged_in_a_bounded_number_of_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "claims").mkdir()
    for i in range(200):
        (tmp_path / "claims" / f"bad{i}.json").write_text("[" * 100)
    with caplog.at_level(logging.INFO):
        started_within_guard(tmp_path / "checkpoint.json")
    assert len(list((tmp_path / "claims").glob("*.bad"))) == 200
    # the checkpoint's own lines: threads of earlier tests' drivers may log meanwhile
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("device_plugin.dra_helper.checkpoint")]
    assert len(ours) < 20 and any("200 bad entries" in m for m in ours), ours


def test_the_driver_serves_after_a_fifo_checkpoint_and_checkpoints_afresh(root: Path) -> None:
    """End to end: the checkpoint a kubelet's DRA call reaches is usable although start-up met a FIFO."""
    (root / "plugins" / DRIVER).mkdir(parents=True)
    os.mkfifo(root / "plugins" / DRIVER / "checkpoint.json")
    reader = HeldClaims()
    claim = reader.add("c", "uid-1", "gpu-0")
    holder: list[object] = []
    thread = threading.Thread(target=lambda: holder.append(dra_server(root, reader=reader)), daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    assert holder, "building the driver hung on the FIFO"
    server = holder[0]
    server.start()  # type: ignore[attr-defined]
    try:
        socket = root / "plugins" / DRIVER / "dra.sock"
        wait_until(socket.exists)
        assert prepare(socket, [claim]).claims["uid-1"].error == ""
        assert Checkpoint(root / "plugins" / DRIVER / "checkpoint.json").uids() == ("uid-1",)
        assert unprepare(socket, [claim]).claims["uid-1"].error == ""
    finally:
        server.stop(0.1)  # type: ignore[attr-defined]
