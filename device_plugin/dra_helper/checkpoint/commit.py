"""When the claims folder is fsynced, and what a failed write of claim files leaves on disk.

Boundary: sequencing of ClaimsFolder operations; no JSON, no in-memory state. Used where claims are
written as files directly (the old checkpoint's migration, a removed folder written again); everyday
changes go through the journal (journal.py). A rename is durable only once its directory is
fsynced; one fsync covers every rename made before it began, so GroupSync lets concurrent writers
share one: a caller returns once an fsync that began after its call has succeeded. replace_files is
all-or-nothing as far as the disk allows: when a write or the fsync fails, the files it already
replaced are put back (best effort, logged) before the error is raised, so a claim that is answered
with an error is not found in the checkpoint after a restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from device_plugin.dra_helper.checkpoint.files import ClaimsFolder

log = logging.getLogger(__name__)


class GroupSync:
    """One fsync at a time, shared by everyone who asked before it began."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self._cond = threading.Condition()
        self._asked = 0  # tickets handed out, one per sync() call
        self._covered = 0  # every ticket up to this one is covered by a successful fsync
        self._running = False
        self.syncs = 0  # fsyncs run (successful or not): fewer than calls when calls overlap

    def sync(self) -> None:
        """Return after a successful fsync that began after this call; raise if the one this caller
        ran failed (a waiter whose leader failed runs its own, so every caller sees its own
        error)."""
        with self._cond:
            self._asked += 1
            ticket = self._asked
            while self._covered < ticket:
                if self._running:
                    self._cond.wait()
                    continue
                self._running, target, succeeded = True, self._asked, False
                self.syncs += 1
                self._cond.release()
                try:
                    self._sync()
                    succeeded = True
                finally:
                    self._cond.acquire()
                    self._running = False
                    if succeeded:
                        self._covered = max(self._covered, target)
                    self._cond.notify_all()


def replace_files(
    folder: ClaimsFolder,
    group: GroupSync,
    files: Mapping[str, bytes],
    previous: Mapping[str, bytes | None],
) -> None:
    """Write `files` (name -> bytes) and sync; on failure put back `previous` (None or absent: no
    file was there, so the write may place it before its fsync) and raise."""
    replaced: list[str] = []
    try:
        folder.write_all(
            [(name, data, previous.get(name) is None) for name, data in files.items()],
            replaced.append,
        )
        group.sync()
    except BaseException:
        _put_back(folder, replaced, previous)
        raise


def _put_back(
    folder: ClaimsFolder, replaced: list[str], previous: Mapping[str, bytes | None]
) -> None:
    for name in replaced:
        try:
            data = previous.get(name)
            if data is None:
                folder.remove(name)
            else:
                folder.write(name, data)
        # the disk is failing: say which claim may be wrong after a restart
        except OSError as error:
            log.error("DRA checkpoint: cannot undo the failed change of %s: %s", name, error)
    if replaced:
        try:
            folder.sync()
        except OSError as error:
            log.error(
                "DRA checkpoint: cannot sync %s after undoing a failed change: %s",
                folder.path,
                error,
            )
