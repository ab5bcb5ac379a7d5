"""The two images the real node runs, built here because no registry can be reached: a pause image (a small
static C program that sleeps, reaps children and exits on SIGTERM) and a busybox image (Debian's static
busybox and a link per applet). Each is one uncompressed layer in an OCI image-layout tar that
`ctr images import` takes.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

PAUSE_IMAGE = "registry.gpu-device-plugin.test/pause:real-node"
BUSYBOX_IMAGE = "registry.gpu-device-plugin.test/busybox:real-node"

PAUSE_SOURCE = r"""
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void done(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
    signal(SIGTERM, done);
    signal(SIGINT, done);
    signal(SIGCHLD, reap);
    for (;;) pause();
}
"""


def _entry(name: str, data: bytes | None = None, link: str | None = None, mode: int = 0o755) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = mode
    info.mtime = 0
    if link is not None:
        info.type = tarfile.SYMTYPE
        info.linkname = link
    elif data is None:
        info.type = tarfile.DIRTYPE
    else:
        info.size = len(data)
    return info


def _layer(files: dict[str, bytes], links: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        folders = sorted({str(Path(p).parent) for p in [*files, *links]} - {"."})
        for folder in folders:
            tar.addfile(_entry(folder))
        for path, data in sorted(files.items()):
            tar.addfile(_entry(path, data), io.BytesIO(data))
        for path, target in sorted(links.items()):
            tar.addfile(_entry(path, link=target))
    return out.getvalue()


def _file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    tar.addfile(_entry(name, data, mode=0o644), io.BytesIO(data))


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    _file(tar, f"blobs/sha256/{digest}", data)
    return f"sha256:{digest}"


def write_image(path: Path, name: str, layer: bytes, command: list[str]) -> Path:
    """An OCI image-layout tar of one layer, named `name` for ctr."""
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Cmd": command, "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }
    config_bytes = json.dumps(config).encode()
    with tarfile.open(path, "w") as tar:
        _file(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        layer_digest = _blob(tar, layer)
        config_digest = _blob(tar, config_bytes)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": len(config_bytes),
            },
            "layers": [
                {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": len(layer)}
            ],
        }
        manifest_bytes = json.dumps(manifest).encode()
        manifest_digest = _blob(tar, manifest_bytes)
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": manifest_digest,
                    "size": len(manifest_bytes),
                    "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name},
                }
            ],
        }
        _file(tar, "index.json", json.dumps(index).encode())
    return path


def build_pause(gcc: Path, folder: Path) -> Path:
    source = folder / "pause.c"
    source.write_text(PAUSE_SOURCE)
    program = folder / "pause"
    subprocess.run([str(gcc), "-static", "-Os", "-o", str(program), str(source)], check=True, capture_output=True)
    layer = _layer({"pause": program.read_bytes()}, {})
    return write_image(folder / "pause.tar", PAUSE_IMAGE, layer, ["/pause"])


def build_busybox(busybox: Path, folder: Path) -> Path:
    listed = subprocess.run([str(busybox), "--list"], check=True, capture_output=True, text=True).stdout.split()
    links = {f"bin/{applet}": "busybox" for applet in listed if applet != "busybox"}
    layer = _layer({"bin/busybox": busybox.read_bytes()}, links)
    return write_image(folder / "busybox.tar", BUSYBOX_IMAGE, layer, ["/bin/sh"])
