"""An advisory file lock (flock) in the plugin data directory: which live instance may use the checkpoint.

Boundary: one lock file, taken and given back; who waits for it and what it guards is the caller's
(service/grpc_service.py). With fixed socket names an instance holds `instance.lock` for as long as it
serves: a second daemon on the same kubelet directory waits for it before it binds a socket or reads
the checkpoint, so it never acts on a snapshot the first one has moved past, and never writes beside
it. The kernel gives the lock back when its holder dies (kill -9 included), so a crashed daemon never
blocks the next one. Taken (held) means "the file at the path is the one we locked": a lock file
removed behind our back (`rm -rf <kubelet>/plugins`) is not held any more, since a newcomer would lock
a fresh file at the path; `held()` tells, and the owner takes the fresh one again.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from pathlib import Path

from device_plugin.core.short_text import short_path

log = logging.getLogger(__name__)

INSTANCE_LOCK = "instance.lock"  # beside the DRA socket; not a name the kubelet-plugin helper of Go uses


class FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock unless another open file holds it; True when we hold it now. OSError: the folder
        or the file cannot be made (named by the caller)."""
        if self.held():
            return True
        self.release()  # ours was removed from the path: the fresh file is the one that counts
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            raise
        self._fd = fd
        if not self.held():  # the file we locked was replaced between our open and our lock: next time
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
        return (
            f"another instance of this DRA driver holds {short_path(self.path)} (a second copy on this kubelet "
            "directory); waiting for it to stop before binding a socket or reading the checkpoint"
        )
