"""The shipped machine catalog, loading by name or path, and backend selection."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from device_plugin.core.errors import MachineDescriptionError, NvmlUnavailableError
from device_plugin.nvml.backends import open_backend
from device_plugin.nvml.fake.catalog import load_machine_description, shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml

REQUIRED = ("dgx1-v100", "dgx-a100", "hgx-h100", "pcie-8gpu-2socket", "workstation-4gpu", "island-16gpu", "single-gpu")

# machine -> (GPU count, model, memory_mib, NUMA nodes of the GPUs in index order); a mixed machine
# gives model and memory_mib per GPU.
EXPECTED: dict[str, tuple[Any, ...]] = {
    "dgx1-v100": (8, "Tesla V100-SXM2-32GB", 32768, [0, 0, 0, 0, 1, 1, 1, 1]),
    "dgx-a100": (8, "NVIDIA A100-SXM4-80GB", 81920, [3, 3, 1, 1, 7, 7, 5, 5]),
    "hgx-h100": (8, "NVIDIA H100 80GB HBM3", 81559, [0, 0, 0, 0, 1, 1, 1, 1]),
    "hgx-h200": (8, "NVIDIA H200", 143771, [0, 0, 0, 0, 1, 1, 1, 1]),
    "pcie-8gpu-2socket": (8, "NVIDIA L40S", 46068, [0, 0, 0, 0, 1, 1, 1, 1]),
    "pcie-8gpu-2nic": (8, "NVIDIA L40S", 46068, [0] * 8),  # issue 13: only half the GPUs near a NIC
    "workstation-4gpu": (4, "NVIDIA RTX A6000", 49140, [0, 0, 0, 0]),
    "island-16gpu": (16, "NVIDIA H100 80GB HBM3", 81559, [0] * 8 + [1] * 8),
    "single-gpu": (1, "NVIDIA A100-PCIE-40GB", 40960, [0]),
    # MIG machines (issue 4); their MIG layouts are checked in tests/mig.
    "a100-mig-7x1g": (8, "NVIDIA A100-SXM4-40GB", 40960, [3, 3, 1, 1, 7, 7, 5, 5]),
    "h100-mig-mixed": (8, "NVIDIA H100 80GB HBM3", 81559, [0, 0, 0, 0, 1, 1, 1, 1]),
    # GB200 NVL72 compute trays of two NVLink cliques (issue 20); fabric facts in tests/nvml/test_fabric.py.
    "gb200-nvl72-tray-a": (4, "NVIDIA GB200", 189471, [0, 0, 1, 1]),
    "gb200-nvl72-tray-b": (4, "NVIDIA GB200", 189471, [0, 0, 1, 1]),
    # Two models on one node, for per-model resource names (issue 20): per GPU.
    "pcie-mixed-a100-t4": (
        6,
        ("NVIDIA A100-PCIE-40GB",) * 2 + ("Tesla T4",) * 4,
        (40960,) * 2 + (15360,) * 4,
        [0, 0, 1, 1, 1, 1],
    ),
}


def test_required_machines_ship_and_names_are_sorted() -> None:
    names = shipped_machine_names()
    assert set(REQUIRED) <= set(names)
    assert list(names) == sorted(names)


def test_every_shipped_machine_is_checked_here() -> None:
    assert set(shipped_machine_names()) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shipped_machine_loads_as_described(name: str) -> None:
    desc = load_machine_description(name)
    count, model, memory_mib, numa = EXPECTED[name]
    assert desc.name == name
    assert len(desc.gpus) == count
    models = model if isinstance(model, tuple) else (model,) * count
    memories = memory_mib if isinstance(memory_mib, tuple) else (memory_mib,) * count
    assert [(g.model, g.memory_mib) for g in desc.gpus] == list(zip(models, memories, strict=True))
    assert [g.numa_node for g in desc.gpus] == numa


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shipped_file_starts_with_a_comment_on_what_it_models(name: str) -> None:
    text = (resources.files("device_plugin") / "machines" / f"{name}.yaml").read_text(encoding="utf-8")
    assert text.startswith("# ")


def test_load_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ngpus:\n  - {model: NVIDIA L4, memory_mib: 23034}\n", encoding="utf-8")
    assert load_machine_description(str(path)).gpus[0].model == "NVIDIA L4"
    assert FakeNvml.from_machine(path).gpus()[0].memory_mib == 23034


def test_unknown_name_lists_the_shipped_machines() -> None:
    with pytest.raises(MachineDescriptionError, match="unknown machine 'dgx-9000'") as caught:
        load_machine_description("dgx-9000")
    assert caught.value.field == "machine"
    assert all(name in str(caught.value) for name in REQUIRED)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(MachineDescriptionError, match=r"no machine-description file at .*absent\.yaml"):
        load_machine_description(str(tmp_path / "absent.yaml"))


def test_open_backend_with_a_machine_gives_its_fake() -> None:
    backend = open_backend("workstation-4gpu")
    assert isinstance(backend, FakeNvml)
    assert len(backend.gpus()) == 4


def test_open_backend_without_a_machine_uses_nvml() -> None:
    try:
        backend = open_backend(None)
    except NvmlUnavailableError as exc:
        assert exc.call == "nvmlInit"  # what a GPU-less machine must say
        return
    try:
        assert not isinstance(backend, FakeNvml)
    finally:
        backend.close()
