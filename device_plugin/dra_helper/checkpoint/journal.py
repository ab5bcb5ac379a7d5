"""The DRA checkpoint's journal: changes appended to one file, a whole batch made durable by one
write.

Boundary: bytes of records in and out of `journal-<n>.log` files in the claims folder; what the
records mean for the map is store.py's. A record is one line: a claim
file's JSON (format.encode) for a put, {"version": 2, "uid": .., "deleted": true} for a delete. The
file is opened O_DSYNC: a write returns once its data is durable (a write and an fdatasync in one
system call, so one wait per round, not two). A line is acknowledged only after the write that
carries it returned, so a crash can leave at most a torn last line of a batch nobody was answered
for: replay ignores it. A failed append is cut back off the file (ftruncate + fdatasync) before the
error is raised, so a claim answered with an error is not replayed after a restart (best effort when
the disk keeps failing: logged, as the per-file undo is).

A new journal's name is made durable (folder fsync) before the first record goes in. The `.log` name
invites log cleaners: a journal removed, renamed (logrotate), replaced or truncated (copytruncate)
while open would take every later record into a file no restart reads. So each append first checks
that the name still leads to our file at the size we wrote (an fstat and an lstat), and if not
writes the journal again from the copy of its records kept in memory (at most about a journal's
rotation size) under its name, fsynced, before the new records go in: a change is acknowledged only
once it is in the named file. Journals are read at start with the config reader's limits (a regular
file only, O_NONBLOCK, MAX_JOURNAL_BYTES) and each line with a depth cap; a bad complete line (not
JSON, the wrong shape, a checksum that does not match: format.verify) is skipped and counted, never
fatal, and the claim it names, when a uid can still be read from it, is reported to the caller as
spoiled: its state from that record on is unknown.
The group commit that forms the batches is group_commit.py's.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from device_plugin.config.reading import MAX_DEPTH, read_regular_file
from device_plugin.dra_helper.checkpoint.files import ClaimsFolder
from device_plugin.dra_helper.checkpoint.format import (
    FORMAT_VERSION,
    MAX_ENTRY_BYTES,
    EntryError,
    PreparedClaim,
    decode,
    sealed,
    verify,
)

log = logging.getLogger(__name__)

PREFIX, SUFFIX = "journal-", ".log"
# read at start; a journal is rotated past checkpoint.COMPACT_AFTER_BYTES
MAX_JOURNAL_BYTES = 64 * 1024 * 1024
MAX_RECORD_BYTES = MAX_ENTRY_BYTES  # a claim's record is what its file would hold, and as bounded

_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_DSYNC | os.O_NOFOLLOW | os.O_CLOEXEC
_NAME = re.compile(rf"{PREFIX}([0-9]{{1,12}}){re.escape(SUFFIX)}")
# a bad line's claim, if it still says
_UID_IN_LINE = re.compile(rb'"uid":"((?:[^"\\]|\\.){1,256})"')

Change = tuple[str, PreparedClaim | None]  # (uid, claim) for a put, (uid, None) for a delete


def journal_name(number: int) -> str:
    return f"{PREFIX}{number:08d}{SUFFIX}"


def journal_number(name: str) -> int | None:
    """The journal's sequence number, or None when `name` is not a journal's."""
    match = _NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def delete_record(uid: str) -> bytes:
    return sealed({"version": FORMAT_VERSION, "uid": uid, "deleted": True}) + b"\n"


class FolderGone(FileNotFoundError):
    """The claims folder itself was removed: no journal can be written in it until it is made
    again."""

    def __init__(self, folder: ClaimsFolder) -> None:
        super().__init__(errno.ENOENT, f"the claims folder {folder.path} was removed")


class Journal:
    """One journal file open for appending; `uids` are the claims it has records of (compaction's
    work)."""

    def __init__(self, folder: ClaimsFolder, number: int) -> None:
        self.number = number
        self.path = folder.path / journal_name(number)
        self._folder = folder
        self._fd = os.open(self.path, _FLAGS | os.O_CREAT | os.O_EXCL, 0o600)
        # a Checkpoint dropped unclosed leaks no fd
        self._closer = weakref.finalize(self, os.close, self._fd)
        try:
            folder.sync()  # the name must survive a crash before any acknowledged record in it does
        except BaseException:
            self.close()
            self.path.unlink(missing_ok=True)
            raise
        self.size = 0
        self.uids: set[str] = set()
        # every record in the file: written again from here if the file is lost
        self._kept = bytearray()

    def append(self, data: bytes, uids: Iterable[str]) -> None:
        """Write `data` (whole lines), durable on return (O_DSYNC); on failure cut it off again and
        raise. The journal is first written again if its file was removed or replaced (see the
        module docstring)."""
        if self._lost():
            # only now: a journal still at its name shows the folder is there
            if not self._folder.exists():
                raise FolderGone(self._folder)
            self._write_again()
        good = self.size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except BaseException:
            self._cut_back(good)
            raise
        self.size = good + len(data)
        self._kept += data
        self.uids.update(uids)

    def _lost(self) -> bool:
        """Whether the name no longer leads to our file with what we wrote in it."""
        ours = os.fstat(self._fd)
        try:
            named = os.lstat(self.path)
        except FileNotFoundError:
            return True
        return (named.st_ino, named.st_dev) != (
            ours.st_ino,
            ours.st_dev,
        ) or ours.st_size != self.size

    def _write_again(self) -> None:
        """Put the records kept in memory back under the journal's name (fsynced, name durable), and
        append to that file from now on; raises OSError (the round fails, the next one tries
        again)."""
        self._folder.write(self.path.name, bytes(self._kept))
        fd = os.open(self.path, _FLAGS)
        self.close()
        self._fd, self._closer = fd, weakref.finalize(self, os.close, fd)
        self._folder.sync()
        log.warning(
            "DRA checkpoint: %s was removed, replaced or cut short while in use (a log cleaner?); "
            "written again from memory (%d bytes)",
            self.path.name,
            self.size,
        )

    def _cut_back(self, good: int) -> None:
        try:
            os.ftruncate(self._fd, good)
            os.fdatasync(self._fd)
        # the disk is failing: the unanswered batch may be replayed at the next start
        except OSError as error:
            log.error("DRA checkpoint: cannot cut a failed batch off %s: %s", self.path.name, error)

    def close(self) -> None:
        self._closer()  # closes once, however often called
        self._fd = -1


def replay(
    path: Path, apply: Callable[[str, PreparedClaim | None], None], spoiled: Callable[[str], None]
) -> tuple[set[str], int]:
    """apply() every complete record of the journal at `path`, in order, and spoiled(uid) in its
    place for a bad record whose uid can be read; (uids it names, bad lines). Raises ConfigError
    when the file is not a regular file or is too large (the caller sets it aside)."""
    data = read_regular_file(path, limit=MAX_JOURNAL_BYTES, field="DRA checkpoint")
    lines = data.split(b"\n")
    # no newline after the last record: a batch cut short by a crash, never acknowledged
    if lines[-1]:
        log.warning(
            "DRA checkpoint: %s ends in a torn record (a crash during a write); ignored", path.name
        )
    uids: set[str] = set()
    bad = 0
    for line in lines[:-1]:
        try:
            uid, claim = _record(line)
        except (EntryError, ValueError, RecursionError):
            bad += 1
            named = _uid_in(line)
            if named is not None:
                spoiled(named)
                uids.add(named)
            continue
        apply(uid, claim)
        uids.add(uid)
    return uids, bad


def _uid_in(line: bytes) -> str | None:
    match = _UID_IN_LINE.search(line[:MAX_RECORD_BYTES])
    if match is None:
        return None
    try:
        uid = json.loads(b'"%s"' % match.group(1))
    except ValueError:
        return None
    return uid if isinstance(uid, str) else None


def _record(line: bytes) -> Change:
    if len(line) > MAX_RECORD_BYTES:
        raise EntryError("record too large")
    value: Any = json.loads(line.decode("utf-8"))
    if isinstance(value, dict) and value.get("deleted") is True:
        uid = value.get("uid")
        if value.get("version") != FORMAT_VERSION or not isinstance(uid, str):
            raise EntryError("malformed delete record")
        verify(value)
        return uid, None
    if _too_deep(value):
        raise EntryError(f"nested deeper than {MAX_DEPTH}")
    return decode(value)


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        stack.extend((child, depth + 1) for child in children)
    return False
