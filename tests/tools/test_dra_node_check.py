"""tools/dra_node_check.py checks the slices a node would publish (simulated here; on a GPU node: real NVML)."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.inventory import build_devices
from device_plugin.dra_helper.api.slices import build_slices
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology

TOOL = Path(__file__).resolve().parents[2] / "tools" / "dra_node_check.py"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dra_node_check", TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["dra_node_check"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("machine", ["hgx-h100", "h100-mig-mixed", "pcie-8gpu-2nic"])
def test_the_check_passes_on_a_simulated_node(
    tool: ModuleType, machine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "slices.json"
    assert tool.main(["--machine", machine, "--json-out", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("PASS") and out_file.read_text().lstrip().startswith("[")


def _slices(machine: str) -> tuple[FakeNvml, list[dict[str, Any]]]:
    backend = FakeNvml.from_machine(machine)
    devices, _ = build_devices(backend, build_topology(backend))
    return backend, build_slices(devices, node_name="n", driver_name=DEFAULT_DRA_DRIVER_NAME, generation=1)


def _drop_first_device(slices: list[dict[str, Any]]) -> None:
    slices[0]["spec"]["devices"].pop(0)


def _duplicate_first_device(slices: list[dict[str, Any]]) -> None:
    slices[0]["spec"]["devices"].append(copy.deepcopy(slices[0]["spec"]["devices"][0]))


def _break_a_partition(slices: list[dict[str, Any]]) -> None:
    slices[0]["spec"]["devices"][0]["attributes"][f"{OWN_DOMAIN}/bestSet4"] = {"int": 99}


def _break_a_ranked_group(slices: list[dict[str, Any]]) -> None:
    slices[0]["spec"]["devices"][0]["attributes"][f"{OWN_DOMAIN}/rankedSet4B"] = {"int": 99}


def _too_many_attributes(slices: list[dict[str, Any]]) -> None:
    slices[0]["spec"]["devices"][0]["attributes"].update({f"extra{i}": {"int": i} for i in range(30)})


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        (_drop_first_device, "not published as gpu-"),
        (_duplicate_first_device, "published 2 times"),
        (_break_a_partition, f"{OWN_DOMAIN}/bestSet4=99 has 1 GPU"),
        (_break_a_ranked_group, f"{OWN_DOMAIN}/rankedSet4B=99 has 1 GPU"),
        (_too_many_attributes, "attributes and capacities (limit 32)"),
    ],
    ids=[
        "a-gpu-missing",
        "a-device-twice",
        "a-partition-of-the-wrong-size",
        "a-ranked-group-of-the-wrong-size",
        "over-the-attribute-limit",
    ],
)
def test_the_check_catches_what_it_is_for(tool: ModuleType, tamper: Any, expected: str) -> None:
    backend, slices = _slices("hgx-h100")
    assert tool.check_slices(slices, backend) == []
    tamper(slices)
    assert any(expected in failure for failure in tool.check_slices(slices, backend))
