"""Prepared claims on disk: what NodePrepareResources answered, per claim UID, one file per claim.

Boundary: the in-memory map and its API (get, uids, put, remove, put_many, delete_many); the file
format, the folder, the fsync batching and the start-up read are the checkpoint_* modules. A change
costs O(1) in the number of claims checkpointed: it writes (or unlinks) only its own claims' files
in `claims/` beside the old `checkpoint.json`, and shares one directory fsync with concurrent changes;
put_many writes many claims at once. A restarted driver reloads the folder: a claim prepared before
the restart is answered from here (not prepared twice) and can still be unprepared.

Memory follows the disk: a failed put is not remembered (and its files are put back), a failed delete
forgets only the claims whose files are gone. Changes to one UID are serialized (striped locks), so
the file and the map never disagree on which of two racing puts won. A folder removed behind our back
(`rm -rf <kubelet>/plugins`) is recreated, with every claim in memory, at the next change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

from device_plugin.dra.checkpoint_commit import GroupSync, remove_files, replace_files
from device_plugin.dra.checkpoint_files import ClaimsFolder
from device_plugin.dra.checkpoint_format import PreparedClaim, PreparedDevice, encode, file_name
from device_plugin.dra.checkpoint_load import load

__all__ = ["CLAIMS_FOLDER", "Checkpoint", "PreparedClaim", "PreparedDevice"]

log = logging.getLogger(__name__)

CLAIMS_FOLDER = "claims"
STRIPES = 64  # locks that serialize changes per UID (hash(uid) % STRIPES)


class Checkpoint:
    """Thread-safe map claim UID -> PreparedClaim, persisted on every change.

    `path` is the old single-file checkpoint (`plugins/<driver>/checkpoint.json`): migrated at start
    into the `claims/` folder beside it, then removed.
    """

    def __init__(self, path: Path) -> None:
        self.legacy_path = path
        self.folder = ClaimsFolder(path.parent / CLAIMS_FOLDER)
        self._group = GroupSync(self.folder.sync)
        self._lock = threading.Lock()  # guards _claims, held only for dict operations
        self._stripes = tuple(threading.Lock() for _ in range(STRIPES))
        self._claims = load(self.folder, self._group, path)

    @property
    def directory(self) -> Path:
        """The claims folder (the files the driver owns, with `legacy_path`)."""
        return self.folder.path

    @property
    def syncs(self) -> int:
        """Directory fsyncs run so far (fewer than changes when changes overlap)."""
        return self._group.syncs

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
        """Checkpoint every claim, all or none: raises OSError (and remembers none) when the disk fails."""
        if not claims:
            return
        self._recreate_if_removed()
        with self._holding(_stripes_of(claims)):
            with self._lock:
                before = {uid: self._claims.get(uid) for uid in claims}
            files = {file_name(uid): encode(uid, claim) for uid, claim in claims.items()}
            previous = {file_name(uid): None if old is None else encode(uid, old) for uid, old in before.items()}
            replace_files(self.folder, self._group, files, previous)
            with self._lock:
                self._claims.update(claims)

    def delete_many(self, uids: Collection[str]) -> frozenset[str]:
        """Forget `uids`; the ones that were checkpointed. Raises OSError when a file could not be
        removed or the folder not synced; memory then still holds exactly the claims whose files remain."""
        if not uids:
            return frozenset()
        self._recreate_if_removed()
        removed: set[str] = set()
        with self._holding(_stripes_of(uids)):
            with self._lock:
                by_name = {file_name(uid): uid for uid in uids if uid in self._claims}
            try:
                remove_files(self.folder, self._group, list(by_name), lambda name: removed.add(by_name[name]))
            finally:
                with self._lock:
                    for uid in removed:
                        self._claims.pop(uid, None)
        return frozenset(removed)

    @contextmanager
    def _holding(self, stripes: list[int]) -> Iterator[None]:
        """Hold these stripe locks, taken in index order (so two batches never deadlock)."""
        with ExitStack() as stack:
            for index in stripes:
                stack.enter_context(self._stripes[index])
            yield

    def _recreate_if_removed(self) -> None:
        """The folder is gone (someone removed the kubelet's plugins/): make it and write every claim
        we hold again, with every change stopped meanwhile (so no delete is undone by the rewrite)."""
        if self.folder.exists():
            return
        with self._holding(list(range(STRIPES))):
            if self.folder.exists():
                return
            with self._lock:
                claims = dict(self._claims)
            log.warning("DRA checkpoint: %s was removed; writing its %d claims again", self.folder.path, len(claims))
            self.folder.open()
            replace_files(self.folder, self._group, {file_name(u): encode(u, c) for u, c in claims.items()}, {})


def _stripes_of(uids: Collection[str]) -> list[int]:
    return sorted({hash(uid) % STRIPES for uid in uids})
