"""Pieces the DRA checkpoint tests (tests/dra/test_checkpoint_*.py) share: a prepared claim per number, a
folder's listing, and a journal on a disk that fails or is slow."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from device_plugin.dra_helper.checkpoint import journal as checkpoint_journal
from device_plugin.dra_helper.checkpoint.values import PreparedClaim, PreparedDevice


def claim(i: int) -> PreparedClaim:
    device = PreparedDevice(("gpus",), "node-a", f"gpu-{i % 8}", (f"nvidia.com/gpu=GPU-{i:08x}",))
    return PreparedClaim("ns", f"c{i}", (device,))


def files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def journal_writes(monkeypatch: pytest.MonkeyPatch, *, failures: int = 0, delay_s: float = 0.0) -> None:
    """The journal's next `failures` writes fail with EIO; each write to a journal takes `delay_s` more
    (a slow disk). Other writes of the process are left alone."""
    real, left = os.write, [failures]

    def write(fd: int, data: bytes | memoryview) -> int:
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith("journal-"):
            time.sleep(delay_s)
            if left[0] > 0:
                left[0] -= 1
                raise OSError(5, "Input/output error")
        return real(fd, data)

    monkeypatch.setattr(checkpoint_journal.os, "write", write)
