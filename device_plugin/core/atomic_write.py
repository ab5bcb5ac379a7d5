"""One atomic file write: the data goes to a temporary file in the same folder, is fsynced, and is
renamed over the target, so a reader sees the old content or the new, never a part.

Boundary: one file, no folder fsync (the callers decide when a folder's entries must be durable: the
checkpoint groups them, the labels file does not need it). Used by the node-feature-discovery labels
file (config/safe_write.py), the DRA checkpoint's claim files (dra_helper/checkpoint/files.py) and
the CDI specs of MPS shares (dra/mps/cdi_spec.py).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def replace_atomically(
    directory: Path, name: str, data: bytes, *, temp_prefix: str, mode: int, fresh: bool = False
) -> None:
    """Write `data` to `directory/name` atomically, with permission bits `mode`.

    The temporary file is `<temp_prefix><name>-<random>` in `directory` (a prefix readers skip: a
    leading dot for node-feature-discovery, the checkpoint's own for its loader). By default it is
    fsynced before the rename, so the old content stays until the new one is durable. `fresh` (no
    file `name` exists yet) renames first and fsyncs after, so one journal commit carries both the
    data and the name (on ext4 and XFS); a crash before the fsync returns may then leave a short
    file under the new name, which only a caller that never acknowledged it may allow."""
    temp = directory / f"{temp_prefix}{name}-{secrets.token_hex(4)}"
    target = directory / name
    fd = os.open(temp, _FLAGS, mode)
    placed = False
    try:
        try:
            os.fchmod(fd, mode)  # the umask must not narrow it (nfd-worker may run as another user)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fresh:
                os.replace(temp, target)
                placed = True
            os.fsync(fd)
        finally:
            os.close(fd)
        if not fresh:
            os.replace(temp, target)
    except BaseException:
        (target if placed else temp).unlink(missing_ok=True)
        raise
