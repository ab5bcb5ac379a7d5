"""`allocate`, `labels` and `topology` show what `run` would serve: they take --config / --mig-strategy and
go through the daemon's own composition (build_node), so a MIG-enabled GPU that the daemon never serves
whole is never offered, and the MIG and sharing labels are the ones the daemon writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_plugin.cli import main
from device_plugin.config.loader import load_config
from device_plugin.dp.composition import build_node
from device_plugin.dp.resource_reporting import label_options
from device_plugin.nvml.backends import open_backend
from device_plugin.observability.labels import compute_labels, format_features_file

TIME_SLICING = """\
version: v1
sharing:
  timeSlicing:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""


@pytest.fixture
def time_slicing(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(TIME_SLICING, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _no_config_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CONFIG_FILE", "MIG_STRATEGY", "DEVICE_LIST_STRATEGY", "DEVICE_ID_STRATEGY"):
        monkeypatch.delenv(name, raising=False)


# ---- allocate ---------------------------------------------------------------------------------


def test_allocate_on_a_mixed_node_offers_only_the_gpus_served_whole(capsys: pytest.CaptureFixture[str]) -> None:
    # h100-mig-mixed: GPUs 0-3 are MIG-enabled; under every strategy only 4-7 are nvidia.com/gpu.
    assert main(["allocate", "--machine", "h100-mig-mixed", "--size", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpus"] == [4, 5, 6, 7]


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--machine", "h100-mig-mixed", "--size", "1", "--available", "0,5"], "GPU 0"),
        (["--machine", "h100-mig-mixed", "--size", "5"], "--size 5 exceeds the 4 nvidia.com/gpu devices"),
        (["--machine", "a100-mig-7x1g", "--size", "1"], "nvidia.com/gpu is not served"),
        (
            [
                "--machine",
                "a100-mig-7x1g",
                "--mig-strategy",
                "single",
                "--resource",
                "nvidia.com/mig-1g.5gb",
                "--size",
                "1",
            ],
            "nvidia.com/mig-1g.5gb is not served",
        ),
        (["--machine", "h100-mig-mixed", "--mig-strategy", "single", "--size", "1"], "flags.migStrategy"),
    ],
    ids=[
        "a MIG-enabled GPU named in --available",
        "more than the GPUs served whole",
        "an all-MIG node under migStrategy none",
        "a resource the strategy does not advertise",
        "a strategy the node refuses",
    ],
)
def test_allocate_refuses_what_the_daemon_would_not_serve(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["allocate", *argv]) == 2
    assert says in capsys.readouterr().err


def test_allocate_serves_a_mig_resource_under_mixed(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--machine", "a100-mig-7x1g", "--mig-strategy", "mixed", "--resource", "nvidia.com/mig-1g.5gb"]
    assert main(["allocate", *argv, "--size", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["devices"]) == 2 and all(d.startswith("MIG-") for d in out["devices"])


def test_allocate_with_a_time_slicing_config_hands_out_replicas(
    time_slicing: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["allocate", "--machine", "workstation-4gpu", "--config", str(time_slicing), "--size", "2", "--json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert all("::" in d for d in out["devices"]) and len(out["gpus"]) == 2  # distributed: two GPUs


# ---- labels -----------------------------------------------------------------------------------


def _daemon_labels(machine: str, mig_strategy: str, config_file: Path | None = None) -> str:
    config = load_config(config_file=config_file, cli={"flags.migStrategy": mig_strategy})
    backend = open_backend(machine)
    try:
        return format_features_file(compute_labels(backend, label_options(build_node(backend, config), config)))
    finally:
        backend.close()


def test_labels_mixed_prints_the_mig_labels_the_daemon_writes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["labels", "--machine", "h100-mig-mixed", "--mig-strategy", "mixed"]) == 0
    out = capsys.readouterr().out
    assert "nvidia.com/mig-1g.10gb.count=8\n" in out and "nvidia.com/mig-3g.40gb.count=2\n" in out
    assert out == _daemon_labels("h100-mig-mixed", "mixed")


def test_labels_with_a_time_slicing_config_print_the_sharing_labels(
    time_slicing: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["labels", "--machine", "workstation-4gpu", "--config", str(time_slicing)]) == 0
    out = capsys.readouterr().out
    assert "nvidia.com/gpu.replicas=4\n" in out and "nvidia.com/gpu.sharing-strategy=time-slicing\n" in out


def test_labels_refuse_a_broken_config_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: v1\nflags:\n  migStrategy: sometimes\n", encoding="utf-8")
    assert main(["labels", "--machine", "workstation-4gpu", "--config", str(bad)]) == 2
    assert "flags.migStrategy" in capsys.readouterr().err


# ---- topology ---------------------------------------------------------------------------------


def test_topology_warns_about_time_slicing_only_when_configured(
    time_slicing: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topology", "--machine", "workstation-4gpu"]) == 0
    assert "time-slicing" not in capsys.readouterr().out
    assert main(["topology", "--machine", "workstation-4gpu", "--config", str(time_slicing)]) == 0
    out = capsys.readouterr().out
    assert "WARNING: time-slicing has no memory or fault isolation" in out
    assert "nvidia.com/gpu: 4 x 4 time-sliced replicas" in out
