"""An advisory file lock (flock) in the plugin data directory: which live instance may use the
checkpoint.

Boundary: one lock file, taken and given back; who waits for it and what it guards is the caller's
(service/grpc_service.py). With fixed socket names an instance holds `instance.lock` for as long as
it serves: a second daemon on the same kubelet directory waits for it before it binds a socket or
reads the checkpoint, so it never acts on a snapshot the first one has moved past, and never writes
beside it. The kernel gives the lock back when its holder dies (kill -9 included), so a crashed
daemon never blocks the next one. In rolling-update mode (per-instance socket names) two instances
serve at once and CallLock serialises their claim changes instead; they hold `instance.lock` shared,
so they serve side by side, while a fixed-name instance (exclusive) and a per-instance one never do:
a surge between the two namings (a switch, `kubectl rollout undo`) waits instead of sharing the
checkpoint with an instance that takes no call lock. Taken (held) means "the file at the path is the
one we locked": a lock file removed behind our back (`rm -rf <kubelet>/plugins`) is not held any
more, since a newcomer would lock a fresh file at the path; `held()` tells, and the owner takes the
fresh one again.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from device_plugin.core.short_text import short_path

log = logging.getLogger(__name__)

# beside the DRA socket; not a name the kubelet-plugin helper of Go uses
INSTANCE_LOCK = "instance.lock"
CALL_LOCK = "serialize.lock"  # the Go helper's name for the same job, in the same directory
STAMP_BYTES = 64


class FileLock:
    def __init__(self, path: Path, *, shared: bool = False) -> None:
        """`shared`: held by rolling-update instances side by side (flock LOCK_SH); exclusive
        otherwise."""
        self.path = path
        self.shared = shared
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock unless another open file holds it; True when we hold it now. OSError: the
        folder or the file cannot be made (named by the caller)."""
        if self.held():
            return True
        self.release()  # ours was removed from the path: the fresh file is the one that counts
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            raise
        self._fd = fd
        # the file we locked was replaced between our open and our lock: next time
        if not self.held():
            self.release()
            return False
        return True

    def held(self) -> bool:
        """We hold the lock on the file that is at the path now."""
        fd = self._fd
        if fd is None:
            return False
        try:
            here = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        mine = os.fstat(fd)
        return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)

    def release(self) -> None:
        """Give the lock back (closing the file does); the file stays, for the next holder."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def waiting(self) -> str:
        """What /readyz says while another instance holds the lock."""
        if self.shared:
            return (
                "an instance of this DRA driver with fixed socket names holds "
                f"{short_path(self.path)}; a "
                "rolling-update instance (socketNames: per-instance) waits for it to stop: switch "
                "namings with "
                "maxSurge 0 (docs/upgrade.md)"
            )
        return (
            f"another instance of this DRA driver holds {short_path(self.path)} (a second copy on "
            "this kubelet "
            "directory, or a rolling-update instance while socketNames is switched); waiting for "
            "it to stop "
            "before binding a socket or reading the checkpoint"
        )


class CallLock:
    """Rolling-update mode: two instances share one checkpoint, so each claim change of either runs
    under flock(`serialize.lock`), a fresh open file per call (threads of one process exclude each
    other too). The file holds a stamp that the instance which last changed the checkpoint wrote: a
    stamp other than the one this instance last saw means the other changed it, and `reload` reads
    it again first."""

    def __init__(
        self, path: Path, *, reload: Callable[[], None], rounds: Callable[[], int]
    ) -> None:
        self.path = path
        self._reload = reload
        # the checkpoint's write rounds so far: a change made under the lock shows in it
        self._rounds = rounds
        self._token = secrets.token_hex(8)
        self._count = 0
        self._seen = b""

    def catch_up(self) -> bool:
        """Read the checkpoint again if the other instance changed it since we last looked (its
        stamp differs); True when it did. A look without the lock first: nothing is taken while
        nothing changed."""
        try:
            with open(self.path, "rb") as file:
                stamp = file.read(STAMP_BYTES)
        except FileNotFoundError:
            return False
        if stamp == self._seen:
            return False
        with self.held():  # reloads under the lock
            pass
        return True

    @contextmanager
    def held(self) -> Iterator[None]:
        """The lock for one claim change. A "pending" stamp is written before the change and the
        final one after it: an instance killed in between leaves the pending stamp, which the other
        has never seen, so it reads the checkpoint again before it acts (it used to keep its stale
        view of the holders and confirm a GPU that the dead instance had written to another
        claim)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            # blocks: run in a worker thread, never on the serving loop
            fcntl.flock(fd, fcntl.LOCK_EX)
            stamp = os.pread(fd, STAMP_BYTES, 0)
            if stamp != self._seen:
                self._reload()
                self._seen = stamp
            before = self._rounds()
            _stamp(fd, f"{self._token} {self._count + 1} pending\n".encode())
            try:
                yield
            finally:
                if self._rounds() != before:
                    self._count += 1
                    stamp = f"{self._token} {self._count}\n".encode()
                _stamp(fd, stamp)  # nothing changed: the stamp the other instance already knows
                self._seen = stamp
        finally:
            os.close(fd)  # and the lock with it


def _stamp(fd: int, stamp: bytes) -> None:
    os.pwrite(fd, stamp, 0)
    os.ftruncate(fd, len(stamp))
