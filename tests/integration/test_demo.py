"""The demo runs end to end on a simulated node and says what happened."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from device_plugin.cli import main


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """The demo configures logging like a program does (root handlers, level ERROR); undo it so
    later tests in this process still see INFO records (caplog)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize("machine", ["dgx1-v100", "single-gpu"], ids=["eight-gpus", "one-gpu"])
def test_demo_walks_through_and_exits_zero(machine: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--machine", machine]) == 0
    out = capsys.readouterr().out
    assert "version v1beta1, endpoint nvidia-gpu.sock" in out
    assert "NUMA 0" in out
    assert "Allocate -> NVIDIA_VISIBLE_DEVICES=GPU-" in out
    assert "registered again" in out
    assert "Unhealthy after" in out and "Healthy again after" in out
    assert "Last list the kubelet saw: 0 devices. Files left: []" in out


def test_demo_refuses_an_unknown_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--machine", "no-such-machine"]) == 2
    assert "no-such-machine" in capsys.readouterr().out


def test_demo_on_dgx1_prefers_the_double_nvlink_pair(capsys: pytest.CaptureFixture[str]) -> None:
    # GPU 0 is taken by the 1-GPU pod; the 2-GPU pod gets a pair sharing two NVLinks (50 GB/s), and of
    # those 4-7, whose GPUs sit on different PCIe switches, each with its own NIC (rail-aligned, issue 13).
    assert main(["demo", "--machine", "dgx1-v100"]) == 0
    assert "pod-2 (2 GPUs): 7 free; plugin prefers GPU 4, GPU 7, ring 50 GB/s per direction" in capsys.readouterr().out
