"""The DRA checkpoint's claims folder: one file per claim, written atomically, nothing else.

Boundary: names and bytes in one directory; what the bytes mean is format.py's job, when the
directory is fsynced is commit.py's. A write is a temp file (TEMP_PREFIX, O_EXCL, mode 0600)
written in full, fsynced, then renamed over the claim's file: a crash leaves the old file or the new
one, never a mix, plus at worst a temp file that the next start removes (a new claim's file is
renamed first and fsynced after: see write). Nothing here follows a
symbolic link out of the folder: temp files are created with O_NOFOLLOW, and the folder itself must
be a real directory (ClaimsFolder.open sets anything else aside and makes a fresh one).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from device_plugin.core.atomic_write import replace_atomically
from device_plugin.core.short_text import short_path

log = logging.getLogger(__name__)

TEMP_PREFIX = ".tmp-"
BAD_SUFFIX = ".bad"
# files written (and fsynced) at once by write_all: fsyncs in flight share journal commits
WRITERS = 32

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def set_aside(path: Path, why: str, *, logged: bool = True) -> Path:
    """Rename `path` to `<path>.bad` (replacing an older one), log why ("is ...") unless not
    `logged`; never raises."""
    target = path.with_name(path.name + BAD_SUFFIX)
    try:
        os.replace(path, target)
    except OSError as error:
        log.error(
            "DRA checkpoint: %s %s and cannot be set aside: %s",
            short_path(path),
            why,
            error.strerror,
        )
        return path
    if logged:
        log.warning("DRA checkpoint: %s %s; set aside as %s", short_path(path), why, target.name)
    return target


def keep_aside(path: Path, why: str) -> None:
    """Hard-link `path` as `<path>.bad` (replacing an older one) and log why ("has ..."): the file
    stays in use under its own name (a journal with bad records still replays), the link keeps what
    it held after the name goes. Never raises."""
    target = path.with_name(path.name + BAD_SUFFIX)
    try:
        target.unlink(missing_ok=True)
        os.link(path, target, follow_symlinks=False)
    except OSError as error:
        log.error(
            "DRA checkpoint: %s %s and cannot be kept aside: %s",
            short_path(path),
            why,
            error.strerror,
        )
        return
    log.warning("DRA checkpoint: %s %s; a copy kept as %s", short_path(path), why, target.name)


class ClaimsFolder:
    """The folder of claim files; every operation is by name inside it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def open(self) -> None:
        """Make sure the folder is a real directory (not a file, FIFO or symlink), creating it if
        needed."""
        try:
            mode = os.lstat(self.path).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            return
        if mode is not None:
            set_aside(self.path, "is not a directory")
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        _fsync_directory(self.path.parent)  # the new folder's own entry must survive a crash too

    def exists(self) -> bool:
        try:
            return stat.S_ISDIR(os.lstat(self.path).st_mode)
        except OSError:
            return False

    def write(self, name: str, data: bytes, *, fresh: bool = False) -> None:
        """Atomically replace (or create) file `name` with `data`, fsynced; the directory is not
        synced.

        `fresh`: no file `name` exists (a new claim). It is then renamed into place before its
        fsync, so that one journal commit carries both the data and the name and the directory fsync
        that follows finds nothing left to do (on ext4 and XFS: half the commits a put waits for). A
        crash before the fsync returns can leave a short file, but only under a claim that was never
        answered; the next start sets it aside. A file that replaces another is fsynced before the
        rename: the old content stays until the new one is durable.
        """
        replace_atomically(self.path, name, data, temp_prefix=TEMP_PREFIX, mode=0o600, fresh=fresh)

    def write_all(
        self, files: Sequence[tuple[str, bytes, bool]], done: Callable[[str], None]
    ) -> None:
        """write() each (name, data, fresh), many at once; `done(name)` after each success; the
        first error is raised after every write has finished (so the caller knows which files were
        replaced)."""
        if len(files) == 1:
            name, data, fresh = files[0]
            self.write(name, data, fresh=fresh)
            done(name)
            return
        futures = [
            (name, _writers().submit(self.write, name, data, fresh=fresh))
            for name, data, fresh in files
        ]
        first: BaseException | None = None
        for name, future in futures:
            error = future.exception()
            if error is None:
                done(name)
            elif first is None:
                first = error
        if first is not None:
            raise first

    def remove(self, name: str) -> bool:
        """Unlink file `name`; False when it was not there."""
        try:
            os.unlink(self.path / name)
        except FileNotFoundError:
            return False
        return True

    def sync(self) -> None:
        """fsync the directory: the renames and unlinks before this call survive a crash."""
        _fsync_directory(self.path)


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _writers() -> ThreadPoolExecutor:
    """One pool for every checkpoint in the process, made on first use (put_many of many claims)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(WRITERS, thread_name_prefix="dra-checkpoint-write")
        return _pool
