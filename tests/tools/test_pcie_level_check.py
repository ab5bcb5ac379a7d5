"""tools/pcie_level_check.py: NVML's GPU-GPU levels against the sysfs path rule (simulated NVML, fake sysfs)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.nic.fake_sysfs import add_pci_function

TOOL = Path(__file__).resolve().parents[2] / "tools" / "pcie_level_check.py"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pcie_level_check", TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["pcie_level_check"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("machine", ["dgx1-v100", "pcie-8gpu-2socket"])
def test_a_simulated_machine_agrees_with_itself(
    tool: ModuleType, machine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool.main(["--machine", machine]) == 0
    assert capsys.readouterr().out == "28 GPU pairs: 28 agree, 0 differ, 0 unknown\n"


def test_a_sysfs_tree_that_disagrees_with_nvml_is_reported_pair_by_pair(
    tool: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # workstation-4gpu's NVML: GPUs 0,1 on host bridge hb0 (PHB), 2,3 on hb1; NODE across. This tree puts
    # GPUs 0 and 1 under one switch (PIX), GPU 2 on a second root bus (NODE from both: agrees), and has no GPU 3.
    add_pci_function(tmp_path, ["0000:00:01.0", "0000:1f:00.0", "0000:20:00.0", "0000:01:00.0"])
    add_pci_function(tmp_path, ["0000:00:01.0", "0000:1f:00.0", "0000:20:01.0", "0000:21:00.0"])
    add_pci_function(tmp_path, ["0000:40:01.0", "0000:41:00.0"], root_bus="pci0000:40")
    assert tool.main(["--machine", "workstation-4gpu", "--sys-root", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "GPU0-GPU1: NVML PHB, paths PIX  (cpu0/pci0000:00/0000:1f:00.0 | cpu0/pci0000:00/0000:1f:00.0)"
    assert [line.split(":")[0] for line in lines[1:-1]] == ["GPU0-GPU3", "GPU1-GPU3", "GPU2-GPU3"]
    assert all("paths unknown" in line for line in lines[1:-1])
    assert lines[-1] == "6 GPU pairs: 2 agree, 1 differ, 3 unknown"


def test_an_unknown_machine_exits_2(tool: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert tool.main(["--machine", "no-such-machine"]) == 2
    assert "cannot load machine" in capsys.readouterr().err
