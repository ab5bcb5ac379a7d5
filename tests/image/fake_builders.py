"""Named stand-ins for the container builders' CLIs, to test `make image`'s choice among them (and only that).

A builder here is a shell script answering `info` with a fixed exit status; every other call prints its
arguments, so a test that ran a build by mistake would see it. `path_with` makes a PATH holding exactly
the named builders plus the few real tools the Makefile and deploy/image/pick-builder.sh call, so a
builder installed on the test machine (buildah, a docker CLI) is never found.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

TOOLS_THE_CHOICE_CALLS = ("sh", "sed", "timeout")


@dataclass(frozen=True)
class FakeBuilder:
    command: str  # docker, podman or buildah
    info_exit: int  # `info`'s exit status: 0 when the builder works

    def script(self) -> str:
        return f'#!/bin/sh\n[ "$1" = info ] && exit {self.info_exit}\necho "{self.command} called: $*"\n'


BUILDERS = {
    "docker-with-daemon": FakeBuilder("docker", 0),
    "docker-without-daemon": FakeBuilder("docker", 1),  # the CLI alone: "Cannot connect to the Docker daemon"
    "podman": FakeBuilder("podman", 0),
    "broken-podman": FakeBuilder("podman", 125),  # e.g. its storage cannot be opened
    "buildah": FakeBuilder("buildah", 0),
}


def path_with(bin_dir: Path, *names: str) -> str:
    """A PATH of `bin_dir` holding the builders `names` (keys of BUILDERS) and the real tools the choice needs."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        builder = BUILDERS[name]
        script = bin_dir / builder.command
        script.write_text(builder.script(), encoding="utf-8")
        script.chmod(0o755)
    for tool in TOOLS_THE_CHOICE_CALLS:
        real = shutil.which(tool)
        assert real, f"{tool} is needed on this machine to run the Makefile's choice"
        (bin_dir / tool).symlink_to(real)
    return str(bin_dir)
