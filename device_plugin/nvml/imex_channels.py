"""IMEX channel device nodes on a real node: which /dev/nvidia-caps-imex-channels/channel<N> exist.

An IMEX channel is a character device the NVIDIA driver creates (module parameter
NVreg_CreateImexChannel0, or the IMEX daemon's setup) under /dev/nvidia-caps-imex-channels; a
container that holds one can import GPU memory exported by another node of the same NVLink fabric.
NVIDIA's device plugin counts a channel as present only when its node is a character device; so does
this. Boundary: one directory listing under an injected /dev root; no NVML.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

from device_plugin.core.errors import NvmlError

IMEX_CHANNELS_DIR = "nvidia-caps-imex-channels"  # under /dev
_CHANNEL = re.compile(r"^channel(0|[1-9][0-9]{0,8})\Z")


def imex_channel_path(channel: int) -> str:
    """The container (and host) path of channel `channel`'s device node."""
    return f"/dev/{IMEX_CHANNELS_DIR}/channel{channel}"


def scan_imex_channels(dev_root: Path) -> frozenset[int]:
    """The channel numbers with a character device under `dev_root`; empty when the directory is
    absent.

    Raises NvmlError naming the path when the directory exists but cannot be read."""
    directory = dev_root / IMEX_CHANNELS_DIR
    found: set[int] = set()
    try:
        entries = list(directory.iterdir())
    except FileNotFoundError:
        return frozenset()
    except OSError as exc:
        raise NvmlError(
            "list IMEX channels", f"cannot read {directory}: {exc.strerror or exc}"
        ) from exc
    for entry in entries:
        match = _CHANNEL.match(entry.name)
        if match is None:
            continue
        try:
            if stat.S_ISCHR(entry.stat().st_mode):
                found.add(int(match.group(1)))
        except OSError:
            continue  # vanished between the listing and the stat: not present
    return frozenset(found)
