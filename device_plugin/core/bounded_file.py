"""Read a file with limits, so a hostile or broken path is refused fast and never hangs or fills
memory.

Boundary: a path in, bytes out (or ConfigError naming the caller's field); what the bytes mean is
the caller's. The one bounded reader: the config file (config/reading.py), the DRA checkpoint
(core/bounded_json.py), machine descriptions and the NIC sysfs attributes (nvml/) use it. Limits:
- a regular file only, opened with O_NONBLOCK and checked with fstat before any read: a FIFO or a
  device (/dev/zero) at the path, also behind a symbolic link, is refused at once instead of
  blocking;
- at most `limit` bytes, read as at most that plus one byte (so "exactly the limit" is told from
  "over").
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import short_path


def read_regular_file(path: Path, *, limit: int, field: str, hint: str = "") -> bytes:
    """The bytes of a regular file of at most `limit` bytes; ConfigError(field) otherwise, without
    blocking. `hint` follows the size refusal (why the limit is what it is)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as error:
        raise ConfigError(field, f"cannot read {short_path(path)}: {error.strerror}") from error
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(field, f"{short_path(path)} is {_kind(mode)}, not a regular file")
        chunks: list[bytes] = []
        left = limit + 1  # one byte more tells "exactly the limit" from "over it"
        while left > 0:
            chunk = os.read(fd, min(left, 256 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as error:
        raise ConfigError(field, f"cannot read {short_path(path)}: {error.strerror}") from error
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise ConfigError(field, f"{short_path(path)} is larger than {limit} bytes{hint}")
    return data


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"
