"""Files we write at a path an operator names (the node-labels file): where we may, and how.

Boundary: path checks and one atomic write; what goes into the file is the caller's. The docs
promise we never touch files we do not own, and a ConfigMap can name any path, so:
- a target inside a refused directory is refused, comparing both the path as written and the path
  with every existing symlink followed. The kubelet directories we serve in (kubelet_owned_dirs: the
  device-plugin directory, whose kubelet_internal_checkpoint a labels file once overwrote, and
  beside it plugins/, holding the DRA sockets and our DRA checkpoint, and plugins_registry/) are
  refused;
- a target that exists must be a regular file (a symlink to one is fine: the rename replaces the
  link itself); a FIFO, a device, a directory or a socket is refused, and never opened for reading
  without O_NONBLOCK, so nothing can hang or fill memory;
- the content goes to a hidden temp file (O_EXCL) in the target's real directory and is renamed
  over the target: readers see the old file or the new one, and the rename never writes through
  a symlink.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from device_plugin.config.reading import read_regular_file
from device_plugin.core.atomic_write import replace_atomically
from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import short_path

log = logging.getLogger(__name__)

MAX_EXISTING_BYTES = 1024 * 1024  # the old content is read only to skip unchanged writes
# The kubelet's directories beside its device-plugin directory: DRA sockets and driver state (our
# DRA checkpoint lies in plugins/<driver>/), and the plugin registration sockets.
KUBELET_SIBLING_DIRS = ("plugins", "plugins_registry")


def kubelet_owned_dirs(device_plugin_dir: Path) -> tuple[Path, ...]:
    """The directories a file we write must stay out of: devicePluginDir and the kubelet dirs beside
    it."""
    kubelet_dir = Path(device_plugin_dir).parent
    return (Path(device_plugin_dir), *(kubelet_dir / name for name in KUBELET_SIBLING_DIRS))


def check_write_target(path: Path, *, refuse_under: Sequence[Path], field: str) -> Path:
    """Where to write `path` (absolute, final symlink not followed); ConfigError naming `field` if
    refused."""
    absolute = Path(os.path.abspath(path))
    seen = {absolute, absolute.resolve()}
    for directory in refuse_under:
        refused = {Path(os.path.abspath(directory)), Path(os.path.abspath(directory)).resolve()}
        for candidate in seen:
            if any(candidate == d or d in candidate.parents for d in refused):
                raise ConfigError(
                    field,
                    f"{short_path(path)} lies in {short_path(directory)}, which holds the "
                    "kubelet's files "
                    "(sockets, checkpoints); choose a path outside it",
                )
    try:
        mode = os.stat(absolute).st_mode  # follows a final symlink: what would a reader get?
    except FileNotFoundError:
        return absolute  # not there yet (or a dangling link, which the rename replaces)
    except OSError as error:
        raise ConfigError(field, f"cannot use {short_path(path)}: {error.strerror}") from error
    if not stat.S_ISREG(mode):
        raise ConfigError(
            field, f"{short_path(path)} exists and is not a regular file; refusing to replace it"
        )
    return absolute


def write_atomically(path: Path, content: str, *, refuse_under: Sequence[Path], field: str) -> bool:
    """Write `content` to `path` unless it is already there; True when the file changed."""
    target = check_write_target(path, refuse_under=refuse_under, field=field)
    try:
        old = read_regular_file(target, limit=MAX_EXISTING_BYTES, field=field)
    except ConfigError:
        # missing, or too large to be ours: rewrite (the target check above already passed)
        old = None
    encoded = content.encode("utf-8")
    if old == encoded:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    directory = target.parent.resolve()
    # Checked again with the directory as it now resolves (a component may have been a symlink).
    check_write_target(directory / target.name, refuse_under=refuse_under, field=field)
    # A leading dot: node-feature-discovery skips hidden files, so it never reads a half-written
    # one; 0644: nfd-worker may run as another user.
    replace_atomically(directory, target.name, encoded, temp_prefix=".", mode=0o644)
    return True


def remove_if_unchanged(path: Path, content: str, *, field: str) -> bool:
    """Remove `path` if it still holds exactly `content` (what we wrote); True when removed.

    A file that changed since (someone else's now) or is not a regular file is left alone."""
    try:
        current = read_regular_file(path, limit=MAX_EXISTING_BYTES, field=field)
    except ConfigError:
        return False  # gone already, or not a regular file: nothing of ours to remove
    if current != content.encode("utf-8"):
        log.warning("%s: %s changed since we wrote it; leaving it in place", field, path)
        return False
    path.unlink(missing_ok=True)
    return True
