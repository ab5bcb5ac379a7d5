"""nvidia.com/gpu.clique: NVIDIA feature discovery's key, value format and COMPLETED rule, and a warning
for every reason a rack-scale node goes without it."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from device_plugin.cli import main
from device_plugin.nvml.fake.description import parse_machine_description
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.observability.labels import compute_labels

CLUSTER = "4b1d7c2e-93a0-4f6e-8d25-0c6e9f2a7b13"
KEY = "nvidia.com/gpu.clique"


def tray(gpu_fabric: dict[int, dict[str, Any]] | None = None, **fabric: Any) -> FakeNvml:
    doc: dict[str, Any] = {
        "name": "tray",
        "fabric": {"cluster_uuid": CLUSTER, "clique_id": 7, **fabric},
        "gpus": [{"model": "NVIDIA GB200", "memory_mib": 189471} for _ in range(4)],
        "nvswitch": [{"gpus": "all", "links_per_gpu": 18}],
    }
    for index, keys in (gpu_fabric or {}).items():
        doc["gpus"][index]["fabric"] = keys
    return FakeNvml(parse_machine_description(doc))


@pytest.mark.parametrize(
    ("backend", "value", "warnings"),
    [
        (tray(), f"{CLUSTER}.7", 0),
        (tray(state="in_progress"), None, 4),
        (tray(state="not_started"), None, 4),
        (tray(status=6), None, 4),
        (tray({3: {"state": "in_progress"}}), f"{CLUSTER}.7", 1),
        (tray({3: {"clique_id": 8}}), None, 1),
        (FakeNvml.from_machine("hgx-h100"), None, 0),
    ],
    ids=[
        "completed-and-agreed",
        "registration-in-progress",
        "registration-not-started",
        "registration-failed",
        "one-gpu-late-the-rest-agree",
        "gpus-disagree",
        "no-fabric-at-all",
    ],
)
def test_clique_label_follows_the_completed_rule(
    backend: FakeNvml, value: str | None, warnings: int, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="device_plugin.observability.labels"):
        labels = compute_labels(backend)
    assert labels.get(KEY) == value
    assert len([r for r in caplog.records if KEY in r.getMessage()]) == warnings


def test_labels_command_on_the_two_trays_prints_their_cliques(capsys: pytest.CaptureFixture[str]) -> None:
    for machine, clique in (("gb200-nvl72-tray-a", 1), ("gb200-nvl72-tray-b", 2)):
        assert main(["labels", "--machine", machine]) == 0
        assert f"{KEY}={CLUSTER}.{clique}\n" in capsys.readouterr().out
