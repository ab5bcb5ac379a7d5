"""The `sharing` section is parsed into typed values when the config loads; GPU entries wait for build time.

What loading decides (names, replicas, placement, MIG refusals) and what it leaves to the node (GPU
indices and UUIDs), the effective-config rendering in the file's own keys, and reload equality.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from device_plugin.config.model import parse_config
from device_plugin.config.sharing import parse_sharing_section, sharing_as_file
from device_plugin.config.sharing_model import Placement, SelectionEntry
from device_plugin.core.errors import ConfigError
from device_plugin.timeslice.config import resolve_sharing
from tests.timeslice.node import SERVER_8

TS = "sharing.timeSlicing"
GPU4 = {"name": "nvidia.com/gpu", "replicas": 4}


def config_with(*resources: dict[str, Any], flags: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {"flags": flags or {}, "sharing": {"timeSlicing": {"resources": list(resources), **top}}}


REFUSED_AT_LOAD = [
    # Found only at build time before: a config file with them loaded and then failed to serve.
    ("name-not-shareable", config_with({"name": "amd.com/gpu", "replicas": 2}), f"{TS}.resources[0].name"),
    ("rename-reserved-domain", config_with({**GPU4, "rename": "k8s.io/gpu"}), f"{TS}.resources[0].rename"),
    ("policy-unknown", config_with(GPU4, allocationPolicy="random"), f"{TS}.allocationPolicy"),
    ("mig-index-entry", config_with({**GPU4, "devices": ["0:1"]}), f"{TS}.resources[0].devices[0]"),
    ("mig-uuid-on-gpu", config_with({**GPU4, "devices": ["MIG-abc"]}), f"{TS}.resources[0].devices[0]"),
    ("blank-entry", config_with({**GPU4, "devices": [" "]}), f"{TS}.resources[0].devices[0]"),
    ("mps", {"sharing": {"mps": {"resources": [GPU4]}}}, "sharing.mps"),
    (
        "advertised-name-twice",
        config_with({**GPU4, "devices": [0]}, {**GPU4, "devices": [1]}, renameByDefault=True),
        f"{TS}.resources[1].name",
    ),
    (
        "dra-mode-too",
        {**config_with({"name": "amd.com/gpu", "replicas": 2}), "gpuDevicePlugin": {"mode": "dra"}},
        f"{TS}.resources[0].name",
    ),
]


@pytest.mark.parametrize(("raw", "field"), [c[1:] for c in REFUSED_AT_LOAD], ids=[c[0] for c in REFUSED_AT_LOAD])
def test_a_bad_sharing_section_is_refused_when_the_config_loads(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert caught.value.field == field


def test_one_pass_checks_keys_before_values_and_lists_the_known_keys() -> None:
    # The entry has two faults: an unknown field and a name that cannot be shared. The sharing section is
    # checked once (config/sharing.py), keys first, and the message lists the keys that exist.
    with pytest.raises(ConfigError) as caught:
        parse_config(config_with({"name": "x", "replicas": 2, "speed": 3}))
    assert caught.value.field == f"{TS}.resources[0].speed"
    assert caught.value.message.startswith("unknown field; known fields: name, replicas")


@pytest.mark.parametrize(
    ("devices", "accepted"), [(1024, True), (1025, False), (0, False)], ids=["at-the-bound", "over-it", "zero"]
)
def test_a_device_count_is_bounded(devices: int, accepted: bool) -> None:
    raw = config_with({**GPU4, "devices": devices, "rename": "part"})
    if accepted:
        parse_config(raw)
        return
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert caught.value.field == f"{TS}.resources[0].devices" and "1 to 1024" in caught.value.message


def test_gpu_entries_stay_as_written_until_the_gpus_are_known() -> None:
    config = parse_config(config_with({**GPU4, "devices": [99, "GPU-not-here", "7"], "rename": "part"}))
    assert config.sharing.time_slicing is not None
    entries = config.sharing.time_slicing.resources[0].devices.entries
    assert [(e.gpu_index, e.gpu_uuid) for e in entries] == [(99, None), (None, "GPU-not-here"), (7, None)]
    with pytest.raises(ConfigError) as caught:
        resolve_sharing(config.sharing, SERVER_8)
    assert caught.value.field == f"{TS}.resources[0].devices[0]"
    assert "no GPU with index 99" in caught.value.message


def test_resolving_names_every_gpu_by_index() -> None:
    config = parse_config(config_with({**GPU4, "devices": [SERVER_8[6].uuid, 2], "rename": "part"}))
    resolved = resolve_sharing(config.sharing, SERVER_8)
    assert resolved.time_slicing is not None
    assert resolved.time_slicing.resources[0].devices.entries == (
        SelectionEntry(f"{TS}.resources[0].devices[0]", gpu_index=6),
        SelectionEntry(f"{TS}.resources[0].devices[1]", gpu_index=2),
    )


def test_a_later_load_fault_is_named_before_an_earlier_gpu_fault() -> None:
    # Before, the whole section was checked at build time, entry by entry: devices[0] (no GPU 99) came first.
    with pytest.raises(ConfigError) as caught:
        parse_config(config_with({**GPU4, "devices": [99, "0:1"], "rename": "part"}))
    assert caught.value.field == f"{TS}.resources[0].devices[1]"


PACKED_FLAG = {"plugin": {"sharedDevicesAllocationPolicy": "packed"}}


@pytest.mark.parametrize(
    ("flags", "top", "expected"),
    [
        ({}, {}, Placement.DISTRIBUTED),
        ({"plugin": {"sharedDevicesAllocationPolicy": "packed"}}, {}, Placement.PACKED),
        (
            {"plugin": {"sharedDevicesAllocationPolicy": "packed"}},
            {"allocationPolicy": "distributed"},
            Placement.DISTRIBUTED,
        ),
    ],
    ids=["default-distributed", "flag-packed", "file-wins-over-flag"],
)
def test_the_default_placement_comes_from_the_flag(flags: dict, top: dict, expected: Placement) -> None:
    config = parse_config(config_with(GPU4, flags=flags, **top))
    assert config.sharing.time_slicing is not None
    assert config.sharing.time_slicing.resources[0].placement == expected


ROUND_TRIP = [
    ("nothing-shared", None),
    ("nvidia-example", {"timeSlicing": {"renameByDefault": False, "resources": [GPU4]}}),
    ("count", {"timeSlicing": {"resources": [{**GPU4, "devices": 2, "rename": "two"}]}}),
    (
        "lists-and-overrides",
        {
            "timeSlicing": {
                "renameByDefault": True,
                "requireDistinctGPUs": True,
                "allocationPolicy": "packed",
                "failRequestsGreaterThanOne": True,
                "resources": [
                    {**GPU4, "devices": [0, "GPU-x"], "allocationPolicy": "distributed"},
                    {"name": "mig-1g.10gb", "replicas": 2, "devices": ["MIG-a"], "requireDistinctGPUs": False},
                ],
            }
        },
    ),
]


@pytest.mark.parametrize("raw", [c[1] for c in ROUND_TRIP], ids=[c[0] for c in ROUND_TRIP])
def test_the_file_rendering_parses_back_to_the_same_value(raw: dict[str, Any] | None) -> None:
    parsed = parse_sharing_section(raw)
    assert parse_sharing_section(sharing_as_file(parsed)) == parsed


def test_the_effective_config_line_shows_sharing_in_the_file_keys() -> None:
    config = parse_config(config_with({**GPU4, "devices": [1, 0], "rename": "half"}))
    (resource,) = json.loads(config.describe())["sharing"]["timeSlicing"]["resources"]
    assert resource == {"name": "nvidia.com/gpu", "replicas": 4, "rename": "nvidia.com/half", "devices": [1, 0]}
    assert json.loads(parse_config({}).describe())["sharing"] == {}


def test_equal_sections_load_equal_and_hash_alike() -> None:
    # A reload compares the loaded config with the running one to decide whether to re-serve.
    raw = config_with({**GPU4, "devices": [0, "GPU-x"], "rename": "part"})
    first, second = parse_config(raw), parse_config(json.loads(json.dumps(raw)))
    assert first.sharing == second.sharing and hash(first.sharing) == hash(second.sharing)
    changed = config_with({**GPU4, "devices": [0, "GPU-x"], "rename": "part", "replicas": 8})
    assert parse_config(changed).sharing != first.sharing
