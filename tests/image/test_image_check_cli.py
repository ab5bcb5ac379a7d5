"""tools/image_check.py refuses to start without what it needs, and names each missing part (nothing is built)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "image_check.py"


@pytest.mark.parametrize(
    ("args", "named", "not_named"),
    [
        (
            (),
            (
                "buildah (not on PATH)",
                "debootstrap (not on PATH)",
                "chroot (not on PATH)",
                "apt-get install buildah debootstrap",
            ),
            (),
        ),
        (
            ("--base", "python:3.11.13-slim-bookworm"),
            ("buildah (not on PATH)", "apt-get install buildah"),
            ("debootstrap",),
        ),
    ],
    ids=["debian-base-needs-buildah-and-debootstrap", "a-given-base-needs-only-buildah"],
)
def test_missing_tools_are_named_with_the_apt_line(
    tmp_path: Path, args: tuple[str, ...], named: tuple[str, ...], not_named: tuple[str, ...]
) -> None:
    empty_path = tmp_path / "bin"
    empty_path.mkdir()
    done = subprocess.run(
        [sys.executable, str(TOOL), "--cache-dir", str(tmp_path / "cache"), *args],
        env={"PATH": str(empty_path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert all(n in done.stdout for n in named), done.stdout
    assert not any(n in done.stdout for n in not_named), done.stdout
    assert not (tmp_path / "cache").exists(), "nothing is made before the check can run"
