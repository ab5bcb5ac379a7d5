"""`resources`: per-model resource names by NVIDIA's patterns, checked at load and applied at composition."""

from __future__ import annotations

from typing import Any

import pytest

from device_plugin.config.loader import load_config
from device_plugin.config.model import parse_config
from device_plugin.core.errors import ConfigError
from device_plugin.dp.composition import build_node
from device_plugin.nvml.fake.machine import FakeNvml

A100 = "NVIDIA A100-PCIE-40GB"
MIXED = "pcie-mixed-a100-t4"
PER_MODEL = {"gpus": [{"pattern": "*A100*", "name": "a100"}, {"pattern": "Tesla T4", "name": "t4"}]}


def served(machine: str, raw: dict[str, Any]) -> dict[str, list[int]]:
    """Resource name -> the GPU indices behind its devices, as the device-plugin mode composes them."""
    node = build_node(FakeNvml.from_machine(machine), parse_config({"version": "v1", **raw}))
    return {r.resource_name: sorted({i for d in r.snapshot().devices for i in d.gpu_indices}) for r in node.resources}


def counts(machine: str, raw: dict[str, Any]) -> dict[str, int]:
    node = build_node(FakeNvml.from_machine(machine), parse_config({"version": "v1", **raw}))
    return {r.resource_name: len(r.snapshot().devices) for r in node.resources}


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({}, {"nvidia.com/gpu": [0, 1, 2, 3, 4, 5]}),
        (PER_MODEL, {"nvidia.com/a100": [0, 1], "nvidia.com/t4": [2, 3, 4, 5]}),
        (
            {"gpus": [{"pattern": "*A100*", "name": "a100"}]},
            {"nvidia.com/a100": [0, 1], "nvidia.com/gpu": [2, 3, 4, 5]},
        ),
        (
            {"gpus": [{"pattern": "*", "name": "any"}, {"pattern": "*A100*", "name": "a100"}]},
            {"nvidia.com/any": list(range(6))},
        ),
        ({"gpus": [{"pattern": "A100*", "name": "a100"}]}, {"nvidia.com/gpu": [0, 1, 2, 3, 4, 5]}),
        ({"gpus": [{"pattern": "tesla t4", "name": "t4"}]}, {"nvidia.com/gpu": [0, 1, 2, 3, 4, 5]}),
        ({"gpus": [{"pattern": "*", "name": "nvidia.com/all"}]}, {"nvidia.com/all": list(range(6))}),
    ],
    ids=[
        "no-section-default-name",
        "one-name-per-model",
        "unmatched-keep-the-default",
        "first-match-wins",
        "pattern-is-anchored-to-the-whole-name",
        "pattern-is-case-sensitive",
        "prefixed-name-accepted",
    ],
)
def test_gpus_are_served_under_the_first_matching_name(
    resources: dict[str, Any], expected: dict[str, list[int]]
) -> None:
    assert served(MIXED, {"resources": resources} if resources else {}) == expected


def test_mig_devices_are_named_by_their_profile() -> None:
    raw = {
        "flags": {"migStrategy": "mixed"},
        "resources": {
            "mig": [{"pattern": "1g.10gb*", "name": "mig-small"}],
            "gpus": [{"pattern": "*H100*", "name": "h100"}],
        },
    }
    found = counts("h100-mig-mixed", raw)
    # 1g.10gb (8) and 1g.10gb+me (1) both match 1g.10gb*; the other profiles keep their default names
    assert found == {
        "nvidia.com/h100": 4,
        "nvidia.com/mig-small": 9,
        "nvidia.com/mig-2g.20gb": 3,
        "nvidia.com/mig-3g.40gb": 2,
        "nvidia.com/mig-7g.80gb": 1,
    }


def test_a_name_holding_whole_gpus_and_mig_devices_is_refused() -> None:
    raw = {
        "flags": {"migStrategy": "mixed"},
        "resources": {"mig": [{"pattern": "*", "name": "gpu"}]},
    }
    with pytest.raises(ConfigError) as caught:
        served("h100-mig-mixed", raw)
    assert caught.value.field == "resources"
    assert "nvidia.com/gpu" in caught.value.message


def test_time_slicing_names_the_renamed_resource() -> None:
    raw = {
        "resources": PER_MODEL,
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/t4", "replicas": 3}]}},
    }
    assert counts(MIXED, raw) == {"nvidia.com/a100": 2, "nvidia.com/t4": 12}


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ({"gpus": [{"pattern": "*", "name": "example.com/x"}]}, "resources.gpus[0].name"),
        ({"gpus": [{"pattern": "*", "name": "-bad"}]}, "resources.gpus[0].name"),
        ({"mig": [{"pattern": "1g*", "name": "x" * 64}]}, "resources.mig[0].name"),
        ({"gpus": [{"pattern": "*", "name": "ok"}, {"pattern": "*", "name": "a b"}]}, "resources.gpus[1].name"),
        ({"gpus": [{"pattern": "", "name": "ok"}]}, "resources.gpus[0].pattern"),
    ],
    ids=["other-domain", "leading-dash", "longer-than-63", "space", "empty-pattern"],
)
def test_bad_names_are_refused_at_load_naming_the_field(resources: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"version": "v1", "resources": resources})
    assert caught.value.field == field


def test_a_reload_to_other_names_is_a_serving_change(tmp_path: Any) -> None:
    from device_plugin.config.reload import serving_settings

    path = tmp_path / "c.yaml"
    path.write_text("version: v1\n")
    before = load_config(config_file=path)
    path.write_text("version: v1\nresources: {gpus: [{pattern: '*A100*', name: a100}]}\n")
    assert serving_settings(load_config(config_file=path)) != serving_settings(before)
