"""Our sockets as files in a directory that is not ours: a private 0600 bind, identities, cleanup,
lengths.

Boundary: files only, for any kubelet socket (device plugin or DRA). We create and remove our own
sockets and nothing else (a short-lived private folder aside, see bind_private): another file at our
path is refused and left as it is. A missing or unwritable directory is an OSError that names the
directory and the OS reason (DirectoryUnusable); callers retry it.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

SOCKET_MODE = 0o600
# sun_path in struct sockaddr_un on Linux: 108 bytes, the terminating NUL included.
SUN_PATH_BYTES = 108
_STAGE_PREFIX = ".b"  # bind_private's folder: ".b" + 8 random characters (mkdtemp), then "/s"
_STAGE_NAME = "s"
# beyond the directory's own path
STAGING_EXTRA_BYTES = len(f"/{_STAGE_PREFIX}12345678/{_STAGE_NAME}")


class DirectoryUnusable(OSError):
    """The directory is missing or unwritable; the message names it and the OS reason."""


def identity(path: Path) -> tuple[int, int] | None:
    """Which file is at `path` now: (inode, ctime in ns); a re-created file differs in at least
    one."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_ino, st.st_ctime_ns)


def inode(path: Path) -> int | None:
    try:
        return path.lstat().st_ino
    except (FileNotFoundError, NotADirectoryError):
        return None


def describe_os_error(error: OSError) -> str:
    """'No such file or directory (ENOENT)': the OS reason, without Python's decorations."""
    name = errno.errorcode.get(error.errno or 0, "")
    reason = error.strerror or str(error)
    return f"{reason} ({name})" if name else reason


def bind_bytes(path: Path) -> int:
    """The longest sun_path (NUL included) that serving a socket at `path` with bind_private
    needs."""
    final = len(os.fsencode(path))
    staged = len(os.fsencode(path.parent)) + STAGING_EXTRA_BYTES
    return max(final, staged) + 1


def too_long(path: Path) -> str | None:
    """Why a socket at `path` cannot be bound for its length, or None when it fits."""
    needed = bind_bytes(path)
    if needed <= SUN_PATH_BYTES:
        return None
    return (
        f"the socket path {path} needs {needed} bytes (its private bind folder and the NUL "
        "included); "
        f"a unix socket path holds at most {SUN_PATH_BYTES}"
    )


def bind_private(directory: Path, name: str, bind: Callable[[Path], None]) -> int:
    """Bind a socket at `directory/name` that is mode 0600 from its first moment, whatever the
    umask.

    `bind(path)` creates a listening socket at `path`. It binds inside a fresh 0700 folder (mkdtemp
    ignores the umask), so nobody else can connect before the chmod; the socket is then renamed into
    place and the folder removed. Returns the socket's inode. DirectoryUnusable when the directory
    is missing or unwritable; RuntimeError from `bind` as is.
    """
    try:
        private = Path(tempfile.mkdtemp(prefix=_STAGE_PREFIX, dir=directory))
    except OSError as error:
        raise DirectoryUnusable(
            error.errno, f"cannot create a socket in {directory}: {describe_os_error(error)}"
        ) from error
    try:
        staged = private / _STAGE_NAME
        bind(staged)
        os.chmod(staged, SOCKET_MODE)
        target = directory / name
        os.rename(staged, target)
        return target.lstat().st_ino
    finally:
        shutil.rmtree(private, ignore_errors=True)


def check_not_foreign(path: Path) -> bool:
    """True if `path` is free or holds a socket (ours from an earlier run: removed); False if
    another file."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return True
    if not stat.S_ISSOCK(mode):
        return False
    path.unlink(missing_ok=True)
    return True


def served_by_someone(path: Path, timeout_s: float = 0.5) -> bool:
    """True when `path` is a socket that a process accepts connections on (a connect succeeds).

    A socket left by a process that died refuses the connect: False, and it may be replaced. Whether
    the one answering is us is the caller's to tell (by inode)."""
    try:
        if not stat.S_ISSOCK(path.lstat().st_mode):
            return False
    except OSError:
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout_s)
    try:
        probe.connect(str(path))
    except TimeoutError:  # a full backlog: a process listens, it is only busy
        return True
    except OSError:  # ECONNREFUSED (nobody listens), ENOENT (gone meanwhile)
        return False
    finally:
        probe.close()
    return True


def file_kind(path: Path) -> str:
    """'a regular file', 'a directory', ...: what holds `path`, for messages."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return "nothing"
    for test, kind in (
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a named pipe"),
    ):
        if test(mode):
            return kind
    return "a special file"


def remove_own_socket(path: Path, own_inode: int) -> bool:
    """Remove `path` only if it is still the socket we bound (a kubelet may have replaced the dir);
    True if removed."""
    try:
        st = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    if stat.S_ISSOCK(st.st_mode) and st.st_ino == own_inode:
        path.unlink(missing_ok=True)
        return True
    return False
