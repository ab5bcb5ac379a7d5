"""Our sockets in the kubelet's device-plugin directory: names, identities, a private 0600 bind, cleanup.

Boundary: files only. The directory is the kubelet's; we create and remove our own sockets and nothing
else (a short-lived private folder aside, see bind_private). A missing or unwritable directory is an
OSError that names the directory and the OS reason (DirectoryUnusable); the lifecycle retries it.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

SOCKET_MODE = 0o600


class DirectoryUnusable(OSError):
    """The plugin directory is missing or unwritable; the message names it and the OS reason."""


def socket_name(resource_name: str) -> str:
    """`nvidia.com/gpu` -> `nvidia-gpu.sock` (NVIDIA's naming, so operators find it where they expect)."""
    vendor, _, name = resource_name.partition("/")
    return f"{vendor.split('.')[0]}-{name}.sock"


def identity(path: Path) -> tuple[int, int] | None:
    """Which file is at `path` now: (inode, ctime in ns); a re-created file differs in at least one."""
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


def bind_private(directory: Path, name: str, bind: Callable[[Path], None]) -> int:
    """Bind a socket at `directory/name` that is mode 0600 from its first moment, whatever the umask.

    `bind(path)` creates a listening socket at `path`. It binds inside a fresh 0700 folder (mkdtemp
    ignores the umask), so nobody else can connect before the chmod; the socket is then renamed into
    place and the folder removed. Returns the socket's inode. DirectoryUnusable when the directory is
    missing or unwritable; RuntimeError from `bind` as is.
    """
    try:
        private = Path(tempfile.mkdtemp(prefix=".bind-", dir=directory))
    except OSError as error:
        raise DirectoryUnusable(
            error.errno, f"cannot create a socket in {directory}: {describe_os_error(error)}"
        ) from error
    try:
        staged = private / "s.sock"
        bind(staged)
        os.chmod(staged, SOCKET_MODE)
        target = directory / name
        os.rename(staged, target)
        return target.lstat().st_ino
    finally:
        shutil.rmtree(private, ignore_errors=True)


def check_not_foreign(path: Path) -> bool:
    """True if `path` is free or holds a socket (ours from an earlier run: removed); False if another file."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return True
    if not stat.S_ISSOCK(mode):
        return False
    path.unlink(missing_ok=True)
    return True


def remove_own_socket(path: Path, own_inode: int) -> None:
    """Remove `path` only if it is still the socket we bound (a kubelet may have replaced the dir)."""
    try:
        st = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISSOCK(st.st_mode) and st.st_ino == own_inode:
        path.unlink(missing_ok=True)
