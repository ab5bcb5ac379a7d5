"""The image check's smoke runs: the commands run inside the built image, and how each one's output is judged.

Each command goes through the image's own ENTRYPOINT (read from its config by the caller), so a wrong entry
point or PATH fails here as it would under the kubelet. `--version` must name this checkout's version;
`topology` on a shipped machine must print exactly what this checkout prints (the same code and machine
files went into the image); each demo must walk through to its end (allocation, a GPU's fault and
recovery, re-registration or slices, a clean shutdown) and exit 0.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from device_plugin.cli import main

Judge = Callable[[str], list[str]]  # stdout -> problems, none when right
MACHINE = "dgx1-v100"
DEMO_MARKERS = (
    "Allocate -> NVIDIA_VISIBLE_DEVICES=GPU-",
    "Unhealthy after",
    "Healthy again after",
    "registered again",
    "Last list the kubelet saw: 0 devices. Files left: []",
    "Done.",
)
DRA_DEMO_MARKERS = (
    "gpu.nvidia.com/xid=79:NoSchedule",
    "the taint is gone",
    "Unprepared gpu-claim: ok.",
    "Stopped (clean); slices left: 0; sockets left: []",
    "Done.",
)


@dataclass(frozen=True)
class Smoke:
    """One command run in the image (arguments after the entry point) and the judge of its stdout."""

    args: tuple[str, ...]
    judge: Judge

    @property
    def name(self) -> str:
        return " ".join(self.args)


def says_version(version: str) -> Judge:
    want = f"gpu-device-plugin {version}"
    return lambda out: [] if out.strip() == want else [f"printed {out.strip()!r}, not {want!r}"]


def same_as(reference: str) -> Judge:
    """Judge: stdout is `reference` line for line (the first difference is named)."""

    def judge(out: str) -> list[str]:
        got, want = out.splitlines(), reference.splitlines()
        for number, (a, b) in enumerate(zip(got, want, strict=False), start=1):
            if a != b:
                return [f"line {number} is {a!r}, this checkout prints {b!r}"]
        if len(got) != len(want):
            return [f"{len(got)} lines, this checkout prints {len(want)}"]
        return []

    return judge


def has_all(markers: Sequence[str]) -> Judge:
    return lambda out: [f"no {m!r} in its output" for m in markers if m not in out]


def checkout_output(args: Sequence[str]) -> str:
    """What this checkout's CLI prints for `args` (in this process: the code the image was built from)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    if code != 0:
        raise RuntimeError(f"this checkout's `gpu-device-plugin {' '.join(args)}` exited {code}")
    return out.getvalue()


def smoke_runs(version: str) -> tuple[Smoke, ...]:
    topology = ("topology", "--machine", MACHINE)
    return (
        Smoke(("--version",), says_version(version)),
        Smoke(topology, same_as(checkout_output(topology))),
        Smoke(("demo", "--machine", MACHINE), has_all(DEMO_MARKERS)),
        Smoke(("demo", "--mode", "dra", "--machine", MACHINE), has_all(DRA_DEMO_MARKERS)),
    )


def judge_run(smoke: Smoke, done: subprocess.CompletedProcess[str]) -> list[str]:
    """The problems of one finished run: a non-zero exit (with its stderr's end), else what its judge finds."""
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return [f"exited {done.returncode}: {tail}"]
    return smoke.judge(done.stdout)
