"""The allocate and simulate subcommands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_plugin.cli import main


def test_allocate_json_lists_ascending_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["allocate", "--machine", "pcie-8gpu-2socket", "--size", "2", "--available", "7,6,0,2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpus"] == [6, 7]


def test_allocate_explain_names_runner_up(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["allocate", "--machine", "workstation-4gpu", "--size", "1", "--available", "0,1,2", "--explain"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "GPUs: 2"
    assert "runner-up: 0" in out and "why it lost" in out


@pytest.mark.parametrize(
    "extra",
    [
        ["--size", "9"],
        ["--size", "2", "--available", "0,x"],
        ["--size", "2", "--must-include", "3", "--available", "0,1"],
    ],
    ids=["size above the node", "non-numeric index", "must_include not available"],
)
def test_allocate_invalid_input_exits_2(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["allocate", "--machine", "dgx1-v100", *extra]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_simulate_trace_reports_every_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.txt"
    trace.write_text("# a small day\n0 start a 1\n1 start b 2\n2 stop a\n3 start c 2\n", encoding="utf-8")
    assert main(["simulate", "--machine", "workstation-4gpu", "--trace", str(trace), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report) == 3
    ours = report["topology-aware (ours)"]
    assert ours["placed"] == 3 and ours["mean_ring_gbps_by_size"] == {"2": 56.25}


def test_simulate_bad_trace_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.txt"
    trace.write_text("0 start a 1\n1 stop b\n", encoding="utf-8")
    assert main(["simulate", "--machine", "workstation-4gpu", "--trace", str(trace)]) == 2
    assert "pod 'b' is not running" in capsys.readouterr().err
