"""The CDI spec of one claim's MPS shares: what a container of the claim needs to reach its GPU's
MPS daemon with its share's limits, written where the container runtime reads CDI specs, and removed
on Unprepare.

Boundary: the spec's content (pure) and its file (atomic write, remove, the sweep of ours); no
daemon. One spec file per claim, `<own domain>-mps-<claim UID>.json`, kind `<own domain>/mps`, one
CDI device per
share (`<claim UID>-<index of the device in the claim>`). Each device's edits:
- the GPU's pipe folder bind-mounted at /tmp/nvidia-mps, the folder CUDA looks in when
  CUDA_MPS_PIPE_DIRECTORY is unset (so a process that clears its environment still finds the
  daemon);
- CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps;
- CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<share MiB>M: the container sees its one GPU as device 0;
- CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=<compute> when the share was charged compute.
The host path is the daemon's folder as the driver sees it: the DaemonSet mounts the MPS root from
the host at the same path (deploy/), or the mount would name a folder the runtime cannot find.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from device_plugin.core.atomic_write import replace_atomically
from device_plugin.core.short_text import one_line

CDI_VERSION = "0.6.0"  # env and mounts are older than this; containerd 1.7+ and CRI-O read it
CONTAINER_PIPE_DIR = "/tmp/nvidia-mps"
_CLAIM_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")


class SpecError(RuntimeError):
    """A spec that cannot be written (the message names the file and why)."""


def kind(own_domain: str) -> str:
    return f"{own_domain}/mps"


def device_name(claim_uid: str, index: int) -> str:
    if not _CLAIM_UID.fullmatch(claim_uid):  # it names a file and a CDI device: a UID only
        raise SpecError(f"claim UID {one_line(claim_uid, 80)} cannot name a CDI device")
    return f"{claim_uid}-{index}"


def spec_file(folder: Path, own_domain: str, claim_uid: str) -> Path:
    device_name(claim_uid, 0)  # checks the UID
    return folder / f"{own_domain}-mps-{claim_uid}.json"


def share_edits(pipe_dir: Path, memory_mib: int, compute_percent: int) -> dict[str, Any]:
    env = [
        f"CUDA_MPS_PIPE_DIRECTORY={CONTAINER_PIPE_DIR}",
        f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0={memory_mib}M",
    ]
    if compute_percent:
        env.append(f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={compute_percent}")
    mount = {
        "hostPath": str(pipe_dir),
        "containerPath": CONTAINER_PIPE_DIR,
        "options": ["rw", "nosuid", "nodev", "bind"],
    }
    return {"env": env, "mounts": [mount]}


def spec(own_domain: str, devices: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The spec of (CDI device name, container edits) pairs."""
    return {
        "cdiVersion": CDI_VERSION,
        "kind": kind(own_domain),
        "devices": [{"name": name, "containerEdits": edits} for name, edits in devices],
    }


def write(path: Path, body: dict[str, Any]) -> None:
    """Write atomically (the runtime may read the folder at any moment: core/atomic_write.py, its
    temporary file named with a leading dot, which the runtime skips); unchanged content is not
    rewritten."""
    data = json.dumps(body, indent=2, sort_keys=True).encode() + b"\n"
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(path.parent, path.name, data, temp_prefix=".", mode=0o644)
    except OSError as error:
        raise SpecError(f"cannot write the CDI spec {path}: {error}") from None


def remove(path: Path) -> None:
    """Remove the spec; a missing one is fine. SpecError: it stays."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as error:
        raise SpecError(f"cannot remove the CDI spec {path}: {error}") from None


def written(folder: Path, own_domain: str) -> dict[str, Path]:
    """Claim UID -> spec file, of every spec of ours in the folder."""
    prefix = f"{own_domain}-mps-"
    try:
        files = sorted(folder.glob(f"{prefix}*.json"))
    except OSError:
        return {}
    return {p.name[len(prefix) : -len(".json")]: p for p in files}
