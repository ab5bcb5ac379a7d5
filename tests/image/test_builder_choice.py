"""`make image` builds with the first builder that works, says which and why, and passes PYTHON_IMAGE.

`make -n image` prints the recipe without running it, but runs the choice (a $(shell) in the recipe),
so these tests build nothing: the builders are named stand-ins on a PATH of their own (fake_builders.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.image.fake_builders import path_with

REPO = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
PINNED = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", (REPO / "Dockerfile").read_text(), re.MULTILINE)

pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def make(bin_dir: Path, builders: tuple[str, ...], *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path_with(bin_dir, *builders), "HOME": str(bin_dir)}
    assert MAKE
    return subprocess.run(
        [MAKE, "--no-print-directory", "-C", str(REPO), *args], env=env, capture_output=True, text=True, check=False
    )


def build_line(stdout: str) -> str:
    (line,) = [line for line in stdout.splitlines() if " build " in line and not line.startswith("echo")]
    return line


@pytest.mark.parametrize(
    ("builders", "picked", "said"),
    [
        (("docker-with-daemon", "podman", "buildah"), "docker", ""),
        (("docker-without-daemon", "buildah"), "buildah", "docker: installed, but `docker info` fails"),
        (("docker-without-daemon", "podman", "buildah"), "podman", "no docker daemon answers"),
        (("buildah",), "buildah", "docker: not installed; podman: not installed"),
        (("docker-without-daemon", "broken-podman", "buildah"), "buildah", "podman: installed, but `podman info`"),
    ],
    ids=[
        "docker-whose-daemon-answers-first",
        "docker-cli-without-daemon-skipped-for-buildah",
        "docker-cli-without-daemon-skipped-for-podman",
        "only-buildah",
        "podman-whose-info-fails-skipped",
    ],
)
def test_the_first_builder_that_works_is_picked_and_named(
    tmp_path: Path, builders: tuple[str, ...], picked: str, said: str
) -> None:
    done = make(tmp_path / "bin", builders, "-n", "image")
    assert done.returncode == 0, done.stderr
    assert build_line(done.stdout).split()[:2] == [picked, "build"]
    assert f"with {picked} on" in done.stdout, "the recipe says which builder it uses"
    assert said in done.stderr
    assert ("picked" in done.stderr) == bool(said), "a builder passed over is reported, none when the first works"


@pytest.mark.parametrize(
    ("builders", "named"),
    [
        ((), ("docker: not installed", "podman: not installed", "buildah: not installed")),
        (("docker-without-daemon",), ("no docker daemon answers", "buildah: not installed")),
    ],
    ids=["nothing-installed", "only-a-docker-cli-without-daemon"],
)
def test_no_working_builder_fails_naming_each_one(tmp_path: Path, builders: tuple[str, ...], named: tuple[str]) -> None:
    done = make(tmp_path / "bin", builders, "image")  # really run: it must stop before any build
    assert done.returncode == 2
    assert "no working builder" in done.stderr and "apt-get install buildah" in done.stderr
    assert all(n in done.stderr for n in named), done.stderr
    assert "called" not in done.stdout, "no builder was run"


@pytest.mark.parametrize(
    ("args", "python_image"),
    [((), PINNED.group(1) if PINNED else "?"), (("PYTHON_IMAGE=localhost/base:1",), "localhost/base:1")],
    ids=["default-is-the-dockerfiles-pinned-base", "overridden"],
)
def test_python_image_is_passed_as_a_build_arg(tmp_path: Path, args: tuple[str, ...], python_image: str) -> None:
    assert PINNED, "the Dockerfile pins its base with ARG PYTHON_IMAGE=..."
    done = make(tmp_path / "bin", ("buildah",), "-n", "image", *args)
    assert f"--build-arg PYTHON_IMAGE={python_image} " in build_line(done.stdout)


def test_builder_given_on_the_command_line_is_used_without_a_choice(tmp_path: Path) -> None:
    done = make(tmp_path / "bin", ("docker-with-daemon",), "-n", "image", "BUILDER=podman", "IMAGE=r.io/x:1")
    assert build_line(done.stdout).split()[:2] == ["podman", "build"]
    assert build_line(done.stdout).endswith("-t r.io/x:1 .")
    assert done.stderr == ""
