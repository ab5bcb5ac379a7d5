"""The image check's stand-in for the pinned python:3.11-slim base, made from Debian packages, and its cache.

The pinned base cannot be pulled where only package indexes are reachable, so the check builds the real
Dockerfile on a minimal bookworm made with debootstrap (Debian's python3.11 and python3-venv). The
Dockerfile calls `pip` and `python` and expects their scripts on PATH, as in the official image; Debian has
`python3` and a pip that refuses system-wide installs (PEP 668). So the base gets a virtual environment at
/opt/venv, first on PATH: `pip install` lands there and `gpu-device-plugin` is found, with the Dockerfile
unchanged. This adapts the base only; the pinned base needs none of it.

Cache: the base is keyed by its recipe (suite, mirror, packages, architecture and the steps run in it), not
by the mirror's contents. A key found in buildah's store is used as it is; else a rootfs tarball in the
cache directory is imported (seconds); else debootstrap makes one (one to three minutes here). `fresh` skips both.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tools.image.buildah import image_id, import_rootfs

# python3-distutils is named because debootstrap resolves no virtual packages: python3.11-venv depends on
# python3.11-distutils, which only python3-distutils provides.
PACKAGES = ("python3.11", "python3-venv", "python3-distutils")
# What Debian's slim images leave out too: package caches and lists, docs (copyright files kept), man
# pages, translations; and the build host's resolv.conf and hostname, which debootstrap copies in.
TRIM = (
    "rm -rf /var/cache/apt/archives/*.deb /var/cache/apt/*.bin /var/lib/apt/lists/*",
    "find /usr/share/doc -mindepth 1 ! -name copyright ! -type d -delete",
    "rm -rf /usr/share/man/* /usr/share/info/* /usr/share/locale/*",
    "rm -f /etc/resolv.conf /etc/hostname",
)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class BaseRecipe:
    """Everything the base is made from; its key changes when any of it does."""

    suite: str = "bookworm"
    mirror: str = "http://deb.debian.org/debian"
    packages: tuple[str, ...] = PACKAGES
    venv: str = "/opt/venv"
    arch: str = field(default_factory=platform.machine)

    def steps(self) -> tuple[str, ...]:
        """The shell commands run in the new rootfs, in order."""
        return (f"/usr/bin/python3.11 -m venv {self.venv}", *TRIM)

    def key(self) -> str:
        text = json.dumps({**asdict(self), "steps": self.steps()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def tag(self) -> str:
        return f"localhost/gpu-device-plugin-base:{self.suite}-{self.key()}"

    def env(self) -> tuple[str, ...]:
        return (f"PATH={self.venv}/bin:{SYSTEM_PATH}",)


def ensure_base(recipe: BaseRecipe, cache_dir: Path, fresh: bool, say: Callable[[str], None]) -> tuple[str, str]:
    """The base image's tag, made if need be, and how it was had: "in the store", "imported" or "created"."""
    tag = recipe.tag()
    if not fresh and image_id(tag):
        return tag, "in the store"
    tarball = cache_dir / f"{recipe.suite}-{recipe.key()}.tar"
    how = "imported"
    if fresh or not tarball.is_file():
        say(f"making the base with debootstrap ({recipe.suite}, {' '.join(recipe.packages)}) into {tarball}")
        make_rootfs_tarball(recipe, tarball)
        how = "created"
    labels = {
        "org.opencontainers.image.description": "debootstrap base for tools/image_check.py",
        "gpu-device-plugin.base-key": recipe.key(),
    }
    import_rootfs(tarball, tag, recipe.env(), '["python"]', labels)
    return tag, how


def make_rootfs_tarball(recipe: BaseRecipe, tarball: Path) -> None:
    """debootstrap a minimal rootfs, run the recipe's steps in it, pack it as `tarball` (whole or not at all)."""
    tarball.parent.mkdir(parents=True, exist_ok=True)
    (tarball.parent / f"{tarball.stem}.json").write_text(json.dumps(asdict(recipe), indent=2) + "\n")
    with tempfile.TemporaryDirectory(dir=tarball.parent, prefix="rootfs-") as work:
        rootfs = Path(work) / "rootfs"
        log = tarball.with_suffix(".log")
        debootstrap = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(recipe.packages)}",
            recipe.suite,
            str(rootfs),
            recipe.mirror,
        ]
        _logged(debootstrap, log)
        for step in recipe.steps():
            _logged(["chroot", str(rootfs), "/bin/sh", "-c", step], log, append=True)
        partial = Path(work) / "rootfs.tar"
        _logged(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."], log, append=True)
        shutil.move(partial, tarball)


def _logged(command: list[str], log: Path, append: bool = False) -> None:
    with log.open("a" if append else "w", encoding="utf-8") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-20:])
        raise RuntimeError(f"`{' '.join(command)}` exited {code} (log {log}):\n{tail}")
