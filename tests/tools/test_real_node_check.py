"""tools/real_node_check.py runs its end-to-end steps on a simulated machine (on a GPU node: real NVML)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "real_node_check.py"


def test_the_check_passes_on_a_simulated_node(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("real_node_check", TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_node_check"] = module
    spec.loader.exec_module(module)
    assert module.main(["--machine", "workstation-4gpu", "--watch-s", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "nvidia.com/gpu: registered; 4 devices" in out and out.rstrip().endswith("PASS")
