"""The smoke runs' judges accept this checkout's own CLI output and reject outputs that are wrong or cut short.

The image check runs the same commands inside the built image; here they run as processes of this
checkout's console script, so a judge that no right output passes (a marker the demo never prints) fails.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tools.image.smoke import DEMO_MARKERS, Judge, Smoke, has_all, judge_run, same_as, says_version, smoke_runs

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
CLI = Path(sys.executable).with_name("gpu-device-plugin")
RUNS = smoke_runs(VERSION)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("run", RUNS, ids=[r.name.replace(" ", "_") for r in RUNS])
def test_each_judge_passes_this_checkouts_own_output(run: Smoke) -> None:
    done = cli(*run.args)
    assert judge_run(run, done) == []


def test_the_runs_are_the_ones_the_image_check_promises() -> None:
    assert [r.args[0] for r in RUNS] == ["--version", "topology", "demo", "demo"]
    assert RUNS[3].args[1:3] == ("--mode", "dra")


TOPOLOGY = "      GPU0  GPU1\nGPU0    X   NV2\nGPU1  NV2     X\n"


@pytest.mark.parametrize(
    ("judge", "out", "problems"),
    [
        (
            says_version("0.1.0"),
            "gpu-device-plugin 0.0.9\n",
            ["printed 'gpu-device-plugin 0.0.9', not 'gpu-device-plugin 0.1.0'"],
        ),
        (says_version("0.1.0"), "", ["printed '', not 'gpu-device-plugin 0.1.0'"]),
        (
            same_as(TOPOLOGY),
            TOPOLOGY.replace("NV2     X", "SYS     X"),
            ["line 3 is 'GPU1  SYS     X', this checkout prints 'GPU1  NV2     X'"],
        ),
        (same_as(TOPOLOGY), TOPOLOGY + "extra\n", ["4 lines, this checkout prints 3"]),
        (same_as(TOPOLOGY), TOPOLOGY, []),
        (
            has_all(DEMO_MARKERS),
            "Allocate -> NVIDIA_VISIBLE_DEVICES=GPU-0\n",
            [f"no {m!r} in its output" for m in DEMO_MARKERS[1:]],
        ),
    ],
    ids=["wrong-version", "no-version", "topology-differs", "topology-longer", "topology-same", "demo-cut-short"],
)
def test_judges_name_what_is_wrong(judge: Judge, out: str, problems: list[str]) -> None:
    assert judge(out) == problems


def test_a_run_that_fails_is_reported_with_its_exit_and_stderr() -> None:
    done = subprocess.CompletedProcess(["x"], 127, "", "line 1\nexec: gpu-device-plugin: not found\n")
    assert judge_run(RUNS[0], done) == ["exited 127: line 1 | exec: gpu-device-plugin: not found"]
