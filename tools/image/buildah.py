"""The buildah commands of the image check, in one place: build, inspect, import a rootfs, a container's files, runs.

Every build and run uses chroot isolation: it needs no OCI runtime (crun refuses a host whose cgroups are
mounted in hybrid mode, as on the development VMs) and runs as root with the host's network, so pip inside
the build reaches the package index exactly as pip on the host does. A failing command raises
BuildahError with the command and the tail of what it printed.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ISOLATION = ("--isolation", "chroot")


class BuildahError(RuntimeError):
    """A buildah command failed; the message names the command and ends with what it printed."""


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


def buildah(*args: str, log: Path | None = None) -> str:
    """Run `buildah ARGS`; its stdout. With `log`, stdout and stderr go to that file instead (a build's steps)."""
    command = ["buildah", *args]
    if log is None:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise BuildahError(f"`{' '.join(command)}` exited {done.returncode}:\n{_tail(done.stderr)}")
        return done.stdout
    with log.open("w", encoding="utf-8") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        raise BuildahError(f"`{' '.join(command)}` exited {code} (log {log}):\n{_tail(log.read_text())}")
    return ""


def image_id(ref: str) -> str | None:
    """The ID of the local image `ref`, or None when the store has no such image (nothing is pulled)."""
    done = subprocess.run(
        ["buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}", ref],
        capture_output=True,
        text=True,
        check=False,
    )
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def inspect_image(ref: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(buildah("inspect", "--type", "image", ref))
    return result


def image_size(ref: str) -> str:
    """The image's size as `buildah images` states it (e.g. "340 MB": the layers, uncompressed)."""
    (entry,) = json.loads(buildah("images", "--json", ref))
    return str(entry["size"])


def build(
    context: Path,
    tag: str,
    build_args: Mapping[str, str],
    secrets: Mapping[str, Path],
    log: Path,
) -> None:
    """Build `context`/Dockerfile as `tag`; `secrets` (id -> file) are seen only by RUN --mount=type=secret."""
    args = [*ISOLATION, "--pull=false", "--file", str(context / "Dockerfile"), "--tag", tag]
    for name, value in build_args.items():
        args += ["--build-arg", f"{name}={value}"]
    for secret_id, source in secrets.items():
        args += ["--secret", f"id={secret_id},src={source}"]
    buildah("build", *args, str(context), log=log)


def remove_image(ref: str) -> None:
    """Drop an image the check replaced (a rebuild moves the tag and would leave the old one behind)."""
    subprocess.run(["buildah", "rmi", ref], capture_output=True, check=False)


def import_rootfs(tarball: Path, tag: str, env: Sequence[str], cmd: str, labels: Mapping[str, str]) -> None:
    """Commit the filesystem in `tarball` as the single-layer image `tag` (what `podman import` does)."""
    container = buildah("from", "scratch").strip()
    try:
        buildah("add", "--quiet", container, str(tarball), "/")
        config = [f"--env={e}" for e in env] + [f"--label={k}={v}" for k, v in labels.items()]
        buildah("config", *config, f"--cmd={cmd}", container)
        buildah("commit", "--quiet", container, tag)
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)


@contextmanager
def container_of(ref: str) -> Iterator[tuple[str, Path]]:
    """A working container of the local image `ref` and the path of its mounted filesystem; removed after."""
    container = buildah("from", "--pull=false", "--quiet", ref).strip()
    try:
        yield container, Path(buildah("mount", container).strip())
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)


def run_in(container: str, argv: Sequence[str], timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `argv` in `container` (buildah run ignores ENTRYPOINT: callers prepend it); never raises on exit codes."""
    command = ["buildah", "run", *ISOLATION, container, "--", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
