"""Node labels: golden files for every shipped machine, the topology summary, options, the features.d writer."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from device_plugin.cli import main
from device_plugin.core.gpu_models import model_facts
from device_plugin.core.names import OWN_DOMAIN as OWN
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.description import parse_machine_description
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.observability.labels import (
    OWN_LABELS,
    FeaturesFileWriter,
    LabelOptions,
    SharingLabelInput,
    compute_labels,
    format_features_file,
    refresh_features_file,
)
from device_plugin.topology.build import build_topology

from .regenerate_golden import GOLDEN_DIR, expected_text

REGENERATE = ".venv/bin/python -m tests.observability.regenerate_golden"
# Kubernetes: value <= 63 chars, alphanumeric at both ends, [-_.] inside; key prefix a DNS subdomain.
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_KEY = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


@pytest.mark.parametrize("machine", shipped_machine_names())
def test_labels_match_golden_file(machine: str) -> None:
    golden = GOLDEN_DIR / f"{machine}.txt"
    assert golden.is_file(), f"no golden labels for {machine}; run {REGENERATE}"
    assert expected_text(machine) == golden.read_text(encoding="utf-8"), f"labels changed; review, then {REGENERATE}"


def test_every_golden_file_belongs_to_a_shipped_machine() -> None:
    assert sorted(p.stem for p in GOLDEN_DIR.glob("*.txt")) == sorted(shipped_machine_names())


@pytest.mark.parametrize("machine", shipped_machine_names())
def test_labels_are_valid_kubernetes_labels(machine: str) -> None:
    labels = compute_labels(FakeNvml.from_machine(machine))
    bad = {k: v for k, v in labels.items() if not _KEY.match(k) or not _VALUE.match(v)}
    assert bad == {}


# What the hardware is, stated independently of the code: (nvlink kind, largest NVLinked group,
# NUMA nodes with GPUs, family, MIG-capable).
TOPOLOGY = {
    "dgx1-v100": ("mesh", "4", "2", "volta", "false"),  # hybrid cube mesh: two fully linked quads
    "dgx-a100": ("nvswitch", "8", "4", "ampere", "true"),
    "hgx-h100": ("nvswitch", "8", "2", "hopper", "true"),
    "hgx-h200": ("nvswitch", "8", "2", "hopper", "true"),
    "pcie-8gpu-2socket": ("none", "1", "2", "ada-lovelace", "false"),
    "pcie-8gpu-2nic": ("none", "1", "1", "ada-lovelace", "false"),  # one socket; half the GPUs near a NIC
    "workstation-4gpu": ("pairs", "2", "1", "ampere", "false"),  # NVLink bridges on two pairs
    "island-16gpu": ("nvswitch", "8", "2", "hopper", "true"),  # two 8-GPU islands
    "single-gpu": ("none", "1", "1", "ampere", "true"),
    "a100-mig-7x1g": ("nvswitch", "8", "4", "ampere", "true"),  # MIG machines (issue 4): DGX A100 40GB
    "h100-mig-mixed": ("nvswitch", "8", "2", "hopper", "true"),  # HGX H100, half the GPUs partitioned
    "gb200-nvl72-tray-a": ("nvswitch", "4", "2", "blackwell", "true"),  # GB200 NVL72 tray: 2 Graces, 4 GPUs
    "gb200-nvl72-tray-b": ("nvswitch", "4", "2", "blackwell", "true"),
    "pcie-mixed-a100-t4": ("none", "1", "2", "turing", "true"),  # labelled by its most common model, T4
}


@pytest.mark.parametrize("machine", sorted(TOPOLOGY))
def test_topology_labels(machine: str) -> None:
    labels = compute_labels(FakeNvml.from_machine(machine))
    keys = (f"{OWN}/nvlink-kind", f"{OWN}/nvlink-largest-group-gpus", f"{OWN}/gpu-numa-node-count")
    keys += ("nvidia.com/gpu.family", "nvidia.com/mig.capable")
    assert tuple(labels[k] for k in keys) == TOPOLOGY[machine]


def test_topology_table_covers_every_shipped_machine() -> None:
    assert sorted(TOPOLOGY) == sorted(shipped_machine_names())


@pytest.mark.parametrize(
    ("model", "facts"),
    [
        ("Tesla V100-SXM2-32GB", ("volta", 7, 0)),
        ("NVIDIA A100-SXM4-80GB", ("ampere", 8, 0)),
        ("NVIDIA A10", ("ampere", 8, 6)),
        ("NVIDIA RTX A6000", ("ampere", 8, 6)),
        ("NVIDIA RTX 6000 Ada Generation", ("ada-lovelace", 8, 9)),
        ("NVIDIA L40S", ("ada-lovelace", 8, 9)),
        ("NVIDIA H100 80GB HBM3", ("hopper", 9, 0)),
        ("NVIDIA GH200 480GB", ("hopper", 9, 0)),
        ("NVIDIA B200", ("blackwell", 10, 0)),
        ("Tesla T4", ("turing", 7, 5)),
        ("Tesla P100-PCIE-16GB", ("pascal", 6, 0)),
    ],
    ids=["v100", "a100", "a10-not-a100", "rtx-a6000", "rtx-6000-ada", "l40s", "h100", "gh200", "b200", "t4", "p100"],
)
def test_model_family_table(model: str, facts: tuple[str, int, int]) -> None:
    found = model_facts(model)
    assert found is not None and (found.family, found.compute_major, found.compute_minor) == facts


def test_unknown_model_gets_no_family_labels() -> None:
    assert model_facts("Quadro RTX 6000 (made up)") is None


@pytest.mark.parametrize(
    ("sharing", "expected"),
    [
        ({}, {"nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none"}),
        (
            {"nvidia.com/gpu": SharingLabelInput("time-slicing", 4)},
            {
                "nvidia.com/gpu.replicas": "4",
                "nvidia.com/gpu.sharing-strategy": "time-slicing",
                "nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB-SHARED",
            },
        ),
        (
            {"nvidia.com/gpu": SharingLabelInput("time-slicing", 4, renamed=True)},
            {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"},
        ),
        (
            {"nvidia.com/gpu.shared": SharingLabelInput("mps", 2)},
            {"nvidia.com/gpu.shared.replicas": "2", "nvidia.com/gpu.shared.sharing-strategy": "mps"},
        ),
    ],
    ids=["unshared", "time-sliced-gets-shared-suffix", "renamed-keeps-product", "other-resource"],
)
def test_sharing_labels(sharing: dict[str, SharingLabelInput], expected: dict[str, str]) -> None:
    labels = compute_labels(FakeNvml.from_machine("dgx1-v100"), LabelOptions(sharing=sharing))
    assert {k: labels.get(k) for k in expected} == expected


def test_mig_options() -> None:
    labels = compute_labels(FakeNvml.from_machine("dgx1-v100"), LabelOptions(mig_strategy="mixed", mig_capable=True))
    assert (labels["nvidia.com/mig.strategy"], labels["nvidia.com/mig.capable"]) == ("mixed", "true")


@pytest.mark.parametrize(
    "make",
    [
        lambda: LabelOptions(mig_strategy="both"),
        lambda: SharingLabelInput("spatial", 2),
        lambda: SharingLabelInput("time-slicing", 0),
    ],
    ids=["bad-mig-strategy", "bad-sharing-strategy", "zero-replicas"],
)
def test_bad_options_are_rejected(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


# ---- features.d writer ------------------------------------------------------------------------


def test_writer_writes_then_leaves_an_unchanged_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "features.d" / "gpu-device-plugin"
    writer = FeaturesFileWriter(path)
    labels = {"nvidia.com/gpu.count": "8", f"{OWN}/nvlink-kind": "mesh"}
    assert writer.write(labels) is True
    inode = path.stat().st_ino
    assert writer.write(dict(reversed(labels.items()))) is False  # same labels, any order
    assert path.stat().st_ino == inode
    assert path.read_text() == f"{OWN}/nvlink-kind=mesh\nnvidia.com/gpu.count=8\n"
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_writer_replaces_changed_content_atomically(tmp_path: Path) -> None:
    path = tmp_path / "gpu-device-plugin"
    writer = FeaturesFileWriter(path)
    writer.write({"nvidia.com/gpu.count": "8"})
    before = path.stat().st_ino
    assert writer.write({"nvidia.com/gpu.count": "7"}) is True
    assert path.stat().st_ino != before  # a rename, never an in-place rewrite a reader could half-see
    assert sorted(os.listdir(tmp_path)) == ["gpu-device-plugin"]  # no temp file left behind


def test_refresh_survives_an_unwritable_path(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    writer = FeaturesFileWriter(blocker / "gpu-device-plugin")
    assert refresh_features_file(FakeNvml.from_machine("single-gpu"), LabelOptions(), writer) is False


def test_format_is_key_equals_value_sorted() -> None:
    assert format_features_file({"b": "2", "a": "1"}) == "a=1\nb=2\n"


# ---- the command ------------------------------------------------------------------------------


def test_labels_command_prints_the_golden_labels(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["labels", "--machine", "workstation-4gpu"]) == 0
    assert capsys.readouterr().out == (GOLDEN_DIR / "workstation-4gpu.txt").read_text(encoding="utf-8")


def test_labels_command_writes_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gfd"
    assert main(["labels", "--machine", "hgx-h100", "--output", str(out), "--mig-strategy", "single"]) == 0
    assert main(["labels", "--machine", "hgx-h100", "--output", str(out), "--mig-strategy", "single"]) == 0
    assert (
        capsys.readouterr().out.splitlines()[-1].endswith("unchanged (27 labels)")
    )  # 25 + the two NIC labels (issue 13)
    assert "nvidia.com/mig.strategy=single\n" in out.read_text()


def test_labels_command_refuses_an_output_that_is_not_a_regular_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A directory at --output: one line naming the flag and exit 2, as for any other bad argument.
    assert main(["labels", "--machine", "workstation-4gpu", "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--output" in err and "not a regular file" in err, err


def test_labels_command_rejects_an_unknown_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["labels", "--machine", "no-such-machine"]) == 2
    assert "unknown machine" in capsys.readouterr().err


def _described(nvlinks: list[list[int]], nvswitch: list[dict[str, object]], count: int = 2) -> FakeNvml:
    gpus = [{"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559} for _ in range(count)]
    return FakeNvml(parse_machine_description({"name": "n", "gpus": gpus, "nvlinks": nvlinks, "nvswitch": nvswitch}))


NVLINK_EDGES = {
    "a GPU alone on an NVSwitch: nvswitch, group 1": (
        _described([], [{"gpus": [0], "links_per_gpu": 18}]),
        ("nvswitch", "1"),
    ),
    "one bridged pair": (_described([[0, 1, 4]], []), ("pairs", "2")),
    "no links": (_described([], []), ("none", "1")),
}


@pytest.mark.parametrize(("fake", "expected"), NVLINK_EDGES.values(), ids=NVLINK_EDGES.keys())
def test_nvlink_labels_at_the_edges(fake: FakeNvml, expected: tuple[str, str]) -> None:
    labels = compute_labels(fake)
    assert (labels[f"{OWN}/nvlink-kind"], labels[f"{OWN}/nvlink-largest-group-gpus"]) == expected


def test_labels_read_the_topology_they_are_given() -> None:
    fake = FakeNvml.from_machine("dgx1-v100")
    assert compute_labels(fake, topology=build_topology(fake)) == compute_labels(fake)
    other = build_topology(FakeNvml.from_machine("hgx-h100"))  # 8 GPUs too, on an NVSwitch
    assert compute_labels(fake, topology=other)[f"{OWN}/nvlink-kind"] == "nvswitch"


def test_our_topology_labels_follow_the_configured_domain_and_none_sits_under_nvidia() -> None:
    labels = compute_labels(FakeNvml.from_machine("dgx1-v100"), LabelOptions(own_domain="gpus.example.org"))
    ours = {key.split("/", 1)[1] for key in labels if key.startswith("gpus.example.org/")}
    assert ours == set(OWN_LABELS) - {"<resource>.replica-memory"}  # NICs, NUMA nodes, nothing shared
    assert not any(key.startswith(f"{OWN}/") for key in labels)
    assert not any(key.split("/", 1)[1] in OWN_LABELS for key in labels if key.startswith("nvidia.com/"))
