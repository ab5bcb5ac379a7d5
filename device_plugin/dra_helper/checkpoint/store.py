"""Prepared claims on disk: what NodePrepareResources answered, per claim UID.

Boundary: the in-memory map and its API (get, uids, put, remove, put_many, delete_many, compact);
the file formats, the folder, the journal, the group commit and the start-up read are the other
modules. A change costs O(1) in the number of claims checkpointed: its records are appended to the
journal (`claims/journal-<n>.log`), and every change waiting at that moment, from any thread, shares
one write and one fdatasync (journal.py, group commit); put and delete return only once their
round is durable. The journal is compacted in the background once it passes COMPACT_AFTER_BYTES: the
claims it names are written as one file per claim (`claims/<uid>.json`, each fsynced), then it is
removed. A restart reads the files and replays the journals over them (compacted after its first
change), so a claim
prepared before the restart is answered from here (not prepared twice) and can still be unprepared.

Memory follows the disk: a change is applied to the map only after its round is durable, in the
order of the journal, so a failed put is not remembered and a failed delete forgets nothing (the
failed round is cut off the journal again). Compaction reads the map only after it has closed the
journal it compacts, and writes a claim's newest state; a later journal replays anything newer. A
folder removed behind our back (`rm -rf <kubelet>/plugins`) is recreated, with every claim in
memory, at the next change.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from device_plugin.core.short_text import one_line
from device_plugin.dra_helper.checkpoint.commit import GroupSync, replace_files
from device_plugin.dra_helper.checkpoint.files import ClaimsFolder
from device_plugin.dra_helper.checkpoint.format import encode, file_name
from device_plugin.dra_helper.checkpoint.group_commit import CommitQueue
from device_plugin.dra_helper.checkpoint.journal import (
    MAX_RECORD_BYTES,
    FolderGone,
    Journal,
    delete_record,
)
from device_plugin.dra_helper.checkpoint.load import Leftover, load
from device_plugin.dra_helper.checkpoint.values import PreparedClaim

__all__ = ["CLAIMS_FOLDER", "COMPACT_AFTER_BYTES", "Checkpoint"]

log = logging.getLogger(__name__)

CLAIMS_FOLDER = "claims"
COMPACT_AFTER_BYTES = 1024 * 1024  # ~3,500 changes; a restart compacts at most about this much


@dataclass(frozen=True)
class _Changes:
    """One caller's changes: the journal lines, and (uid, claim or None for a delete) in the same
    order."""

    records: bytes
    changes: tuple[tuple[str, PreparedClaim | None], ...]


class Checkpoint:
    """Thread-safe map claim UID -> PreparedClaim, persisted on every change.

    `path` is the old single-file checkpoint (`plugins/<driver>/checkpoint.json`): migrated at start
    into the `claims/` folder beside it, then removed. `deferred`: nothing is read until open(), and
    no change is accepted before it. `shared` (rolling-update mode): every change is made under a
    lock the caller holds across instances, so compaction runs in the change's round, never in the
    background, and reload() reads what the other instance wrote.
    """

    def __init__(self, path: Path, *, deferred: bool = False, shared: bool = False) -> None:
        self.legacy_path = path
        # another instance writes too (under the call lock): compaction runs inline
        self.shared = shared
        self.folder = ClaimsFolder(path.parent / CLAIMS_FOLDER)
        self._group = GroupSync(self.folder.sync)
        self._lock = threading.Lock()  # guards _claims, held only for dict operations
        # the open journal, _closed, _next; taken before _lock
        self._journal_lock = threading.Lock()
        self._compacting = threading.Lock()  # one compaction (or folder rewrite) at a time
        self._background: threading.Thread | None = None
        self._journal: Journal | None = None  # opened by the first change
        self._queue: CommitQueue[_Changes, frozenset[str]] = CommitQueue(self._commit)
        self._claims: dict[str, PreparedClaim] = {}
        self._closed: list[Leftover] = []
        self._next = 1
        self._compact_soon = False
        self.opened = False
        self.damaged = 0
        if not deferred:
            self.open()

    def open(self) -> None:
        """Read the folder (migrating the old file): at construction, or, `deferred`, once the
        caller owns the sockets (so nothing in another live driver's folder is read, renamed or
        compacted). Once only. ConfigError: the folder cannot be made or listed
        (checkpoint/load.py)."""
        if self.opened:
            return
        loaded = load(self.folder, self._group, self.legacy_path)
        self._claims, self._closed, self._next = (
            loaded.claims,
            loaded.leftovers,
            loaded.next_journal,
        )
        # entries set aside: claims the API server may have to restore
        self.damaged = loaded.damaged
        # The journals found are compacted at the first change, in the background: a Checkpoint that
        # only reads (a tool, a test reading back what a live driver wrote) removes nothing.
        self._compact_soon = bool(self._closed)
        self.opened = True

    @property
    def directory(self) -> Path:
        """The claims folder (the files the driver owns, with `legacy_path`)."""
        return self.folder.path

    @property
    def rounds(self) -> int:
        """Journal rounds (one write + one fdatasync each) run so far: fewer than changes when they
        overlap."""
        return self._queue.rounds

    def get(self, uid: str) -> PreparedClaim | None:
        with self._lock:
            return self._claims.get(uid)

    def uids(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(sorted(self._claims))

    def __len__(self) -> int:
        with self._lock:
            return len(self._claims)

    def put(self, uid: str, claim: PreparedClaim) -> None:
        self.put_many({uid: claim})

    def remove(self, uid: str) -> bool:
        """Forget `uid`; False when it was not checkpointed."""
        return uid in self.delete_many((uid,))

    def put_many(self, claims: Mapping[str, PreparedClaim]) -> None:
        """Checkpoint every claim, all or none: raises OSError (and remembers none) when the disk
        fails."""
        if not claims:
            return
        self._check_open()
        records = []
        for uid, claim in claims.items():
            record = encode(uid, claim)
            # it could not be read back: refused now, not lost later
            if len(record) > MAX_RECORD_BYTES:
                what = f"claim {one_line(uid, 64)} needs {len(record)} bytes"
                raise OSError(
                    errno.EFBIG, f"{what}; the checkpoint holds at most {MAX_RECORD_BYTES} a claim"
                )
            records.append(record + b"\n")
        self._queue.submit(_Changes(b"".join(records), tuple(claims.items())))

    def delete_many(self, uids: Collection[str]) -> frozenset[str]:
        """Forget `uids`; the ones that were checkpointed. Raises OSError (and forgets none) when
        the disk fails."""
        # before it, an unknown claim may be one on disk: never "nothing to forget"
        self._check_open()
        with self._lock:
            present = [uid for uid in dict.fromkeys(uids) if uid in self._claims]
        if not present:
            return frozenset()
        records = b"".join(delete_record(uid) for uid in present)
        return self._queue.submit(_Changes(records, tuple((uid, None) for uid in present)))

    def reload(self) -> None:
        """Read the folder again (another instance changed it; the caller holds the lock both take):
        our open journal is closed (it is durable), the journals found are compacted at our next
        change."""
        with self._compacting, self._journal_lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None
            loaded = load(self.folder, self._group, self.legacy_path)
            self._closed, self._next = loaded.leftovers, loaded.next_journal
            self.damaged += loaded.damaged
            with self._lock:
                self._claims = loaded.claims
            self._compact_soon = bool(self._closed)
            self.opened = True

    def _check_open(self) -> None:
        # a bug of ours: a write before the read would compact away what is on disk
        if not self.opened:
            raise OSError(errno.EAGAIN, f"the checkpoint in {self.folder.path} is not read yet")

    def compact(self) -> None:
        """Write every claim the journals name as its own file (fsynced), then remove those
        journals; the next change opens a new journal. Raises OSError (the journals are kept: a
        restart replays them)."""
        with self._compacting:
            with self._journal_lock:
                if self._journal is not None and self._journal.size:
                    self._journal.close()
                    self._closed.append(Leftover(self._journal.path, frozenset(self._journal.uids)))
                    self._journal = None
                closed = list(self._closed)
            if not closed:
                return
            with self._lock:  # after the close: every change in `closed` is in the map by now
                states = {
                    uid: self._claims.get(uid) for leftover in closed for uid in leftover.uids
                }
            # one file at a time: a background job, not a burst of fsyncs
            for uid, claim in states.items():
                if claim is None:  # beside the prepares that wait for the journal
                    self.folder.remove(file_name(uid))
                else:
                    self.folder.write(file_name(uid), encode(uid, claim))
            self.folder.sync()  # the files are durable before the journals that they replace go
            for leftover in closed:
                leftover.path.unlink(missing_ok=True)
            self.folder.sync()  # and those are gone before a later journal is compacted
            with self._journal_lock:
                self._closed = [leftover for leftover in self._closed if leftover not in closed]

    def _commit(self, batch: Sequence[_Changes]) -> list[frozenset[str]]:
        """One round (the queue's leader): append every caller's records, then apply them, in order.
        When the folder was removed, it is made again with every claim and the round tried once
        more."""
        try:
            return self._commit_round(batch)
        except FolderGone:
            self._recreate_if_removed()
            return self._commit_round(batch)

    def _commit_round(self, batch: Sequence[_Changes]) -> list[frozenset[str]]:
        """FolderGone (nothing appended, nothing applied): the folder is not there for the
        journal."""
        uids = [uid for changes in batch for uid, _ in changes.changes]
        removed: list[frozenset[str]] = []
        with self._journal_lock:
            if self._journal is None:
                if not self.folder.exists():
                    raise FolderGone(self.folder)
                self._journal = Journal(self.folder, self._next)
                self._next += 1
            self._journal.append(b"".join(changes.records for changes in batch), uids)
            full = self._journal.size >= COMPACT_AFTER_BYTES
            # under the journal lock: a compaction that closes this journal sees these
            with self._lock:
                for changes in batch:
                    gone = set()
                    for uid, claim in changes.changes:
                        if claim is not None:
                            self._claims[uid] = claim
                        elif self._claims.pop(uid, None) is not None:
                            gone.add(uid)
                    removed.append(frozenset(gone))
            inline = self.shared and (full or self._compact_soon)
            if inline:
                self._compact_soon = False
            elif (full or self._compact_soon) and (
                self._background is None or not self._background.is_alive()
            ):
                self._compact_soon = False
                self._background = threading.Thread(
                    target=self._compact_logged, name="dra-checkpoint-compact", daemon=True
                )
                self._background.start()
        # under the caller's cross-instance lock: the other instance never sees it half done
        if inline:
            self._compact_logged()
        return removed

    def settle(self, timeout_s: float) -> bool:
        """Wait for a background compaction to finish (at stop, once no change can come): a clean
        stop leaves whole claim files, never a temp file for the next start to remove. False if cut
        short."""
        background = self._background
        if background is not None:
            background.join(timeout=max(0.0, timeout_s))
            return not background.is_alive()
        return True

    def _compact_logged(self) -> None:
        try:
            self.compact()
        except OSError as error:  # retried when the journal is full again, and at the next start
            # removed (or being removed) meanwhile:
            if error.errno == errno.ENOENT or not self.folder.exists():
                log.warning(  # the next change writes every claim again if the folder is gone
                    "DRA checkpoint: %s was removed while being compacted: %s",
                    self.folder.path,
                    error,
                )
                return
            log.error(
                "DRA checkpoint: cannot compact the journal into %s: %s", self.folder.path, error
            )

    def _recreate_if_removed(self) -> None:
        """The folder is gone (someone removed the kubelet's plugins/): make it and write every
        claim we hold again, with no compaction running (the leader calls this, so no change runs
        either). The journal tells: one still at its name shows the folder is there, so a round
        looks at the folder only when its journal is lost or a new one is opened."""
        if self.folder.exists():
            return
        with self._compacting:
            if self.folder.exists():
                return
            with self._lock:
                claims = dict(self._claims)
            log.warning(
                "DRA checkpoint: %s was removed; writing its %d claims again",
                self.folder.path,
                len(claims),
            )
            self.folder.open()
            replace_files(
                self.folder,
                self._group,
                {file_name(u): encode(u, c) for u, c in claims.items()},
                {},
            )
            # the journals went with the folder: the files now hold everything
            with self._journal_lock:
                if self._journal is not None:
                    self._journal.close()
                    self._journal = None
                self._closed = []
