"""`make bench` prints and never fails: a missed target or a crashed benchmark is reported, exit 0."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _run_all() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_all", BENCHMARKS / "run_all.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "body, reported",
    [
        ("print('target p99 <= 1 ms: missed')\nraise SystemExit(1)\n", "slow.py (exit 1)"),
        ("raise RuntimeError('boom')\n", "slow.py (exit 1)"),
    ],
    ids=["a benchmark exiting 1", "a benchmark crashing"],
)
def test_run_all_exits_zero_and_names_what_did_not_finish(
    body: str, reported: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fine = tmp_path / "fine.py"
    fine.write_text("print('target x: met')\n", encoding="utf-8")
    slow = tmp_path / "slow.py"
    slow.write_text(body, encoding="utf-8")
    assert _run_all().main([fine, slow]) == 0
    out = capfd.readouterr().out
    assert f"did not finish: {reported}" in out
    assert "target x: met" in out


def test_run_all_lists_every_benchmark_script() -> None:
    listed = set(_run_all().BENCHMARKS)
    assert listed == {p.name for p in BENCHMARKS.glob("bench_*.py")}


def test_replica_benchmark_prints_a_missed_target_and_exits_zero() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_replicas.py"), "--requests", "2", "--target-p99-ms", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "target worst p99 <= 0 ms: missed" in done.stdout
