"""The image check: build the real Dockerfile with buildah, prove no build secret stayed in it, run it.

Usage (root, from the checkout; `make image-check` runs it): .venv/bin/python tools/image_check.py
    [--base debian|IMAGE] [--mirror URL] [--cache-dir DIR] [--fresh-base] [--tag TAG]

1. The base: `debian` (the default) is a minimal bookworm made with debootstrap, for machines that cannot
   pull the pinned python:3.11-slim (tools/image/base.py says how it is adapted and cached); any other
   value is an image to build on as it is, e.g. the pinned one where a registry is reachable.
2. The build: the Dockerfile as it is, PYTHON_IMAGE set to that base; this machine's pip settings and CA
   bundle go in as build secrets only (tools/image/build_pip.py).
3. The leak check on the built image: config, history, every file (tools/image/leaks.py).
4. The smoke runs in the image, through its ENTRYPOINT (tools/image/smoke.py).
It prints each step's figures (times, the image size) and exits 0 when all pass, 1 when a check fails,
2 when it cannot run (not root, buildah or debootstrap missing, a command failing).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tools.image import buildah  # noqa: E402
from tools.image.base import BaseRecipe, ensure_base  # noqa: E402
from tools.image.build_pip import build_pip, machine_pip_options  # noqa: E402
from tools.image.leaks import config_leaks, machine_only_certificates, rootfs_leaks  # noqa: E402
from tools.image.smoke import judge_run, smoke_runs  # noqa: E402

RUN_LIMIT_S = 120  # one smoke run; the demos take about 3 s
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpu-device-plugin" / "image-base"


def say(message: str) -> None:
    print(f"image-check: {message}", flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="debian", help="debian (made with debootstrap) or an image to build on")
    parser.add_argument("--mirror", default=BaseRecipe.mirror, help="Debian mirror for debootstrap")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help=f"default {DEFAULT_CACHE}")
    parser.add_argument("--fresh-base", action="store_true", help="make the Debian base again, cache ignored")
    parser.add_argument("--tag", default="localhost/gpu-device-plugin:image-check", help="the built image's tag")
    return parser.parse_args(argv)


def missing_prerequisites(args: argparse.Namespace) -> list[str]:
    needed = ["buildah"] + (["debootstrap", "chroot", "tar"] if args.base == "debian" else [])
    missing = [f"{tool} (not on PATH)" for tool in needed if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (debootstrap, and buildah's store under /var/lib/containers)")
    return missing


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    missing = missing_prerequisites(args)
    if missing:
        packages = [p for p in ("buildah", "debootstrap") if any(m.startswith(p) for m in missing)]
        say("needs " + ", ".join(missing) + (f"; on Debian: apt-get install {' '.join(packages)}" if packages else ""))
        return 2
    started = time.monotonic()
    try:
        problems = check(args)
    except (buildah.BuildahError, RuntimeError, OSError, subprocess.SubprocessError) as error:
        say(f"could not finish: {error}")
        return 2
    for problem in problems:
        say(f"FAIL {problem}")
    say(f"{'passed' if not problems else 'FAILED'} in {time.monotonic() - started:.1f} s")
    return 1 if problems else 0


def check(args: argparse.Namespace) -> list[str]:
    """Every step in order; the problems found (an empty list when the image is right)."""
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    base, how = args.base, "as given"
    step = time.monotonic()
    if args.base == "debian":
        base, how = ensure_base(BaseRecipe(mirror=args.mirror), args.cache_dir, args.fresh_base, say)
    say(f"base {base}: {how} in {time.monotonic() - step:.1f} s")

    pip = build_pip(machine_pip_options(), os.environ)
    say(f"pip in the build: {'; '.join(pip.conf.strip().splitlines()[1:]) or 'no settings'}")
    for item in pip.left_out:
        say(f"  not passed to the build: {item}")
    replaced = buildah.image_id(args.tag)
    log = args.cache_dir / "last-build.log"
    step = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="image-check-") as private:
        conf_file = Path(private, "pip.conf")
        conf_file.write_text(pip.conf, encoding="utf-8")
        conf_file.chmod(0o600)
        buildah.build(REPO, args.tag, {"PYTHON_IMAGE": base}, pip.secrets(conf_file), log)
    built = buildah.image_id(args.tag)
    if replaced and replaced != built:
        buildah.remove_image(replaced)
    say(f"built {args.tag} in {time.monotonic() - step:.1f} s (log {log}); size {buildah.image_size(args.tag)}")

    step = time.monotonic()
    inspected = buildah.inspect_image(args.tag)
    problems = config_leaks(inspected, pip.sensitive)
    with buildah.container_of(base) as (_, base_root), buildah.container_of(args.tag) as (container, root):
        ca = pip.ca_file.read_bytes() if pip.ca_file else b""
        machine_certs = machine_only_certificates(ca, base_root)
        problems += rootfs_leaks(root, pip.conf.encode(), machine_certs)
        say(
            f"leak check in {time.monotonic() - step:.1f} s: {len(problems)} found (config, history, files; "
            f"{len(machine_certs)} certificate(s) of the CA bundle that the base lacks searched for)"
        )
        problems += smoke(container, inspected["OCIv1"]["config"].get("Entrypoint") or [])
    return problems


def smoke(container: str, entrypoint: list[str]) -> list[str]:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    problems: list[str] = []
    runs = smoke_runs(version)
    step = time.monotonic()
    for run in runs:
        try:
            found = judge_run(run, buildah.run_in(container, [*entrypoint, *run.args], timeout_s=RUN_LIMIT_S))
        except subprocess.TimeoutExpired:
            found = [f"still running after {RUN_LIMIT_S} s"]
        say(f"{run.name}: {'ok' if not found else 'FAILED'}")
        problems += [f"{run.name}: {p}" for p in found]
    say(f"smoke runs in {time.monotonic() - step:.1f} s")
    return problems


if __name__ == "__main__":
    sys.exit(main())
