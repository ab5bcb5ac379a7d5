"""NVIDIA's NVML mock, found through GPU_DEVICE_PLUGIN_NVML_MOCK: its library, its profiles, and the environment a
process needs to run the real pynvml backend on one profile.

Boundary: finding and describing the folder (and running its `render-pci-sysfs`); the processes that load the
library are remote.py's. The facts this relies on (docs/development.md):
- the mock is a Go library: it reads MOCK_NVML_CONFIG (its profile) from the environment the process was
  started with, so setting it later in a running process is not seen; glibc reads LD_LIBRARY_PATH only at
  process start too. One profile therefore needs one process, started with both set.
- a copy of the folder may hold its symlinks as small text files naming their target (`libnvidia-ml.so.1`
  reading "libnvidia-ml.so.550.163.01"), which the loader refuses ("file too short"). The library is found
  by following such names to the ELF file, and each process gets a folder with a real `libnvidia-ml.so.1`
  link to it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ENV = "GPU_DEVICE_PLUGIN_NVML_MOCK"
PROFILES = ("a100", "b200", "gb200", "gb300", "h100", "l40s", "t4")  # the profiles NVIDIA ships in configs/
SONAME = "libnvidia-ml.so.1"  # what pynvml dlopens
OVERRIDES_TTL = "20ms"  # how often the mock re-reads MOCK_NVML_OVERRIDES (its default is 1 s)
_ELF = b"\x7fELF"
_NAME_LINK_MAX_BYTES = 255  # a file this small naming a sibling is a symlink stored as text
_MAX_HOPS = 4


@dataclass(frozen=True)
class NvmlMock:
    """The mock's folder: `library` is the ELF file that `libnvidia-ml.so.1` names."""

    root: Path
    library: Path

    def config(self, profile: str) -> Path:
        return self.root / "configs" / f"mock-nvml-config-{profile}.yaml"

    def has_profile(self, profile: str) -> bool:
        return self.config(profile).is_file()

    def library_dir(self, where: Path) -> Path:
        """`where` with a real `libnvidia-ml.so.1` symlink to the mock library: the folder for LD_LIBRARY_PATH."""
        where.mkdir(parents=True, exist_ok=True)
        link = where / SONAME
        if not link.is_symlink():
            link.symlink_to(self.library)
        return where

    def environment(
        self, profile: str, *, library_dir: Path, overrides: Path, base: Mapping[str, str] = os.environ
    ) -> dict[str, str]:
        """The environment of a process that runs `profile`: the library first on the search path, the profile,
        and the overrides file the mock re-reads while it runs (faults are written there)."""
        if not self.has_profile(profile):
            raise FileNotFoundError(f"the NVML mock at {self.root} has no profile {profile!r} ({self.config(profile)})")
        search = [str(library_dir), *filter(None, base.get("LD_LIBRARY_PATH", "").split(":"))]
        return {
            **base,
            "LD_LIBRARY_PATH": ":".join(search),
            "MOCK_NVML_CONFIG": str(self.config(profile)),
            "MOCK_NVML_OVERRIDES": str(overrides),
            "MOCK_NVML_OVERRIDES_TTL": OVERRIDES_TTL,
        }

    def render_sysfs(self, profile: str, output: Path) -> Path:
        """The sysfs tree `render-pci-sysfs` writes for `profile` under `output`; returns its `sys` folder."""
        command = [str(self.root / "render-pci-sysfs"), "-config", str(self.config(profile)), "-output", str(output)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}")
        return output / "sys"


def find_mock(env: Mapping[str, str] = os.environ) -> tuple[NvmlMock | None, str]:
    """The mock named by GPU_DEVICE_PLUGIN_NVML_MOCK, or None and the reason it cannot be used."""
    value = env.get(ENV, "")
    if not value:
        return None, (
            f"{ENV} is not set: it names the folder of NVIDIA's NVML mock "
            "(.ci/run sets it where the CI machine provides one; docs/development.md)"
        )
    root = Path(value)
    if not root.is_dir():
        return None, f"{ENV}={value}: no such folder"
    library, why = resolve_library(root / SONAME)
    if library is None:
        return None, f"{ENV}={value}: {why}"
    for tool in ("configs", "render-pci-sysfs"):
        if not (root / tool).exists():
            return None, f"{ENV}={value}: no {tool} in the folder"
    return NvmlMock(root.resolve(), library), ""


def resolve_library(path: Path) -> tuple[Path | None, str]:
    """The ELF file `path` leads to, through symlinks or symlinks stored as text; None and why otherwise."""
    for _ in range(_MAX_HOPS):
        try:
            with path.open("rb") as file:
                head = file.read(_NAME_LINK_MAX_BYTES + 1)
        except OSError as exc:
            return None, f"cannot read {path}: {exc.strerror or exc}"
        if head.startswith(_ELF):
            return path.resolve(), ""
        name = head.decode("ascii", "replace").strip()
        target = path.parent / name
        if len(head) > _NAME_LINK_MAX_BYTES or not name or "/" in name or "\n" in name or not target.exists():
            return None, f"{path} is neither an ELF library nor a stored link to one"
        path = target
    return None, f"{path}: more than {_MAX_HOPS} stored links"
