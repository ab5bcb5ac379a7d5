"""The demo runs end to end on a simulated node and says what happened."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.cli import main
from device_plugin.nvml.fake.catalog import shipped_machine_names


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """The demo configures logging like a program does (root handlers, level ERROR); undo it so
    later tests in this process still see INFO records (caplog)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_demo_walks_through_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    # The default timings; every shipped machine is walked through with --fast below.
    assert main(["demo", "--machine", "dgx1-v100"]) == 0
    out = capsys.readouterr().out
    assert "version v1beta1, endpoint nvidia-gpu.sock" in out
    assert "NUMA 0" in out
    assert "Allocate -> NVIDIA_VISIBLE_DEVICES=GPU-" in out
    assert "registered again" in out
    assert "Unhealthy after" in out and "Healthy again after" in out
    assert "Last list the kubelet saw: 0 devices. Files left: []" in out


def test_demo_refuses_an_unknown_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--machine", "no-such-machine"]) == 2
    assert capsys.readouterr().err.startswith("error: machine: unknown machine 'no-such-machine'")


def test_demo_on_dgx1_prefers_the_double_nvlink_pair(capsys: pytest.CaptureFixture[str]) -> None:
    # GPU 0 is taken by the 1-GPU pod; the 2-GPU pod gets a pair sharing two NVLinks (50 GB/s), and of
    # those 4-7, whose GPUs sit on different PCIe switches, each with its own NIC (rail-aligned).
    assert main(["demo", "--machine", "dgx1-v100", "--fast"]) == 0
    assert "pod-2 (2 GPUs): 7 free; plugin prefers GPU 4, GPU 7, ring 50 GB/s per direction" in capsys.readouterr().out


@pytest.mark.parametrize("machine", shipped_machine_names())
def test_demo_works_on_every_machine_its_help_lists(machine: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--machine", machine, "--fast"]) == 0
    out = capsys.readouterr().out
    assert "registered again" in out and "Unhealthy after" in out and "Healthy again after" in out
    assert "Last list the kubelet saw: 0 devices. Files left: []" in out


def test_demo_on_an_all_mig_node_says_it_uses_mixed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--machine", "a100-mig-7x1g", "--fast"]) == 0
    out = capsys.readouterr().out
    assert "The demo uses --mig-strategy mixed" in out
    assert "Following nvidia.com/mig-1g.5gb" in out
    assert "Allocate -> NVIDIA_VISIBLE_DEVICES=MIG-" in out


@pytest.mark.parametrize(
    ("argv", "noted"),
    [([], True), (["--mig-strategy", "mixed"], False)],
    ids=["none-explains-the-missing-gpus", "mixed-has-nothing-to-explain"],
)
def test_demo_on_a_mixed_mig_node_explains_the_gpus_left_out(
    argv: list[str], noted: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--machine", "h100-mig-mixed", *argv, "--fast"]) == 0
    out = capsys.readouterr().out
    assert (
        "Note: GPUs 0, 1, 2, 3 have MIG enabled, so migStrategy none leaves them out of nvidia.com/gpu" in out
    ) is noted


def test_demo_with_an_explicit_strategy_that_serves_nothing_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--machine", "a100-mig-7x1g", "--mig-strategy", "none", "--fast"]) == 1
    assert "nothing to serve" in capsys.readouterr().out


def test_demo_follows_the_config_it_is_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "version: v1\nflags:\n  plugin:\n    deviceListStrategy: volume-mounts\n"
        "sharing:\n  timeSlicing:\n    resources:\n      - {name: nvidia.com/gpu, replicas: 2}\n",
        encoding="utf-8",
    )
    assert main(["demo", "--machine", "workstation-4gpu", "--config", str(config), "--fast"]) == 0
    out = capsys.readouterr().out
    assert "Resources served (migStrategy none): nvidia.com/gpu (8)" in out
    assert "Allocate -> NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices" in out


def test_demo_shows_the_envvar_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--machine", "h100-mig-mixed", "--mig-strategy", "mixed", "--fast"]) == 0
    assert "Note: 6 resources are served" in capsys.readouterr().out


def test_demo_says_which_fields_of_its_config_have_no_effect_without_verbose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\nflags:\n  gdsEnabled: true\n", encoding="utf-8")
    assert main(["demo", "--machine", "workstation-4gpu", "--config", str(config), "--fast"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Note: config: accepted but not applied (no effect in this plugin): flags.gdsEnabled")


def test_demo_refuses_a_broken_config_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\nflags:\n  migStrategy: sometimes\n", encoding="utf-8")
    assert main(["demo", "--config", str(config)]) == 2
    assert capsys.readouterr().err.startswith("error: flags.migStrategy")
