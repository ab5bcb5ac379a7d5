"""CLI error messages in the user's terms: the flag names they typed (not the kubelet's wire fields), and
paths in full (a relative path is shown with the working directory it was taken from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_plugin.cli import main

MACHINE = ["--machine", "dgx1-v100"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["allocate", *MACHINE, "--size", "9"], "error: --size 9 exceeds the 8 nvidia.com/gpu devices on this node"),
        (["allocate", *MACHINE, "--size", "0"], "error: --size must be at least 1, got 0"),
        (
            ["allocate", *MACHINE, "--size", "3", "--available", "0,1"],
            "error: --size 3 exceeds the 2 nvidia.com/gpu devices on the --available GPUs",
        ),
        (
            ["allocate", *MACHINE, "--size", "2", "--available", "0,1", "--must-include", "3"],
            "error: --must-include: GPU 3 not in --available GPUs 0, 1",
        ),
        (
            ["allocate", *MACHINE, "--size", "1", "--must-include", "0,1"],
            "error: --must-include holds 2 devices, more than --size 1",
        ),
    ],
    ids=[
        "size-above-the-node",
        "size-zero",
        "size-above-available",
        "must-include-outside-available",
        "must-above-size",
    ],
)
def test_allocate_names_its_flags_not_the_wire_fields(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip() == message
    assert "allocation_size" not in err and "_deviceIDs" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["topology", "--machine", "nothere.yaml"],
            "error: machine: no machine-description file at {cwd}/nothere.yaml",
        ),
        (["topology", *MACHINE, "--config", "nothere.yaml"], "cannot read {cwd}/nothere.yaml"),
        (["simulate", *MACHINE, "--trace", "nothere.txt"], "error: --trace: cannot read {cwd}/nothere.txt"),
        (["topology", "--machine", "broken.yaml"], "error: machine: {cwd}/broken.yaml is not valid YAML: "),
    ],
    ids=["machine-file", "config-file", "trace-file", "machine-yaml-error-on-one-line"],
)
def test_relative_paths_are_shown_in_full(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.yaml").write_text("gpus: [\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message.format(cwd=tmp_path) in err, err
    assert len(err.strip().splitlines()) == 1 and "\\n" not in err, err


def test_labels_output_names_the_file_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["labels", "--machine", "single-gpu", "--output", "labels.txt"]) == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path}/labels.txt: written (")


@pytest.mark.parametrize(
    "argv",
    [
        ["topology", "--machine", "nope"],
        ["simulate", "--machine", "nope"],
        ["labels", "--machine", "nope"],
        ["dra", "slices", "--machine", "nope"],
    ],
    ids=["topology", "simulate", "labels", "dra-slices"],
)
def test_every_one_shot_subcommand_says_a_bad_machine_the_same_way(  # demo too: tests/integration/test_demo.py
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: machine: unknown machine 'nope'"), captured
