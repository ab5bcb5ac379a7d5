"""The console script as a newcomer meets it: --version, a mistyped flag, output into `| head`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from device_plugin.cli import build_parser, unknown_arguments_message
from device_plugin.core.version import package_version

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "device_plugin.cli"]


def test_version_prints_the_installed_version() -> None:
    done = subprocess.run([*CLI, "--version"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.strip() == f"gpu-device-plugin {package_version()}"
    assert package_version() != "unknown"  # the test environment installs the package


@pytest.mark.parametrize(
    ("argv", "usage", "hint"),
    [
        (["topology", "--machnie", "dgx1-v100"], "usage: gpu-device-plugin topology", "did you mean --machine?"),
        (["allocate", "--size", "2", "--avilable", "0,1"], "usage: gpu-device-plugin allocate", "--available?"),
        (["run", "--mig-strategey", "mixed"], "usage: gpu-device-plugin run", "did you mean --mig-strategy?"),
    ],
    ids=["topology-machine", "allocate-available", "run-mig-strategy"],
)
def test_a_mistyped_flag_gets_the_subcommands_usage_and_the_closest_flag(
    argv: list[str], usage: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from device_plugin.cli import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage), err
    assert hint in err


def test_a_word_with_nothing_close_gets_no_guess() -> None:
    _, commands = build_parser()
    message = unknown_arguments_message(commands["topology"], ["--zzzzzz"])
    assert message == "unrecognized arguments: --zzzzzz"


@pytest.mark.parametrize(
    "argv",
    [["topology", "--machine", "island-16gpu"], ["dra", "slices", "--machine", "dgx1-v100"]],
    ids=["topology", "dra-slices"],
)
def test_output_into_a_pipe_that_closes_early_ends_quietly(argv: list[str]) -> None:
    process = subprocess.Popen([*CLI, *argv], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # what `| head -1` does after its line
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_the_demo_notes_a_sharing_entry_for_a_resource_the_node_does_not_serve(tmp_path: Path) -> None:
    """Issue 32 item 6: the demo ran unshared and said nothing."""
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpus, replicas: 2}]}}\n")
    done = subprocess.run(
        [sys.executable, "-m", "device_plugin.cli", "demo", "--fast", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    notes = [line for line in done.stdout.splitlines() if line.startswith("Note:") and "nothing is shared" in line]
    assert notes == [
        "Note: sharing.timeSlicing.resources[0]: this node has no nvidia.com/gpus devices, so nothing is shared "
        "(did you mean nvidia.com/gpu?)"
    ]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--machine", "single-gpu"], "Simulated node 'single-gpu': 1 GPU (NVIDIA A100-PCIE-40GB)."),
        (["--machine", "single-gpu"], "the new stream lists 1 device."),
        (["--machine", "single-gpu", "--mode", "dra"], "Its device gets a taint:"),
        (["--mode", "dra", "--mig-strategy", "none"], "Note: --mig-strategy none has no effect in mode dra"),
    ],
    ids=["one-gpu-singular", "one-device-singular", "dra-one-device-singular", "dra-says-mig-strategy-is-ignored"],
)
def test_the_demo_says_it_in_words_that_fit(argv: list[str], words: str) -> None:
    """Issue 32 item 10: "1 GPUs", "lists 1 devices", "Its 1 device get a taint", and a flag silently ignored."""
    done = subprocess.run(
        [sys.executable, "-m", "device_plugin.cli", "demo", "--fast", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert words in done.stdout, done.stdout[-3000:]
