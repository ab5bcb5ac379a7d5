"""sharing.* parsing: NVIDIA's v1 keys, our extensions, and errors that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from device_plugin.config.sharing_model import Placement, SelectionKind
from device_plugin.core.errors import ConfigError
from device_plugin.timeslice.config import MPS_NOT_SUPPORTED
from tests.timeslice.node import SERVER_8
from tests.timeslice.parsed import parse_sharing

TS = "sharing.timeSlicing"


def ts(*resources: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"timeSlicing": {"resources": list(resources), **top}}


GPU4 = {"name": "nvidia.com/gpu", "replicas": 4}

INVALID = [
    ("sharing-not-mapping", ["x"], "sharing"),
    ("unknown-sharing-key", {"timeslicing": {}}, "sharing.timeslicing"),
    ("mps-refused", {"mps": {"resources": [GPU4]}}, "sharing.mps"),
    ("timeslicing-not-mapping", {"timeSlicing": "yes"}, TS),
    ("resources-missing", {"timeSlicing": {"renameByDefault": True}}, f"{TS}.resources"),
    ("resources-empty", ts(), f"{TS}.resources"),
    ("unknown-top-key", ts(GPU4, failRequestGreaterThanOne=True), f"{TS}.failRequestGreaterThanOne"),
    ("renameByDefault-not-bool", ts(GPU4, renameByDefault="yes"), f"{TS}.renameByDefault"),
    ("fail-gt-one-not-bool", ts(GPU4, failRequestsGreaterThanOne=1), f"{TS}.failRequestsGreaterThanOne"),
    ("distinct-not-bool", ts(GPU4, requireDistinctGPUs="true"), f"{TS}.requireDistinctGPUs"),
    ("policy-unknown", ts(GPU4, allocationPolicy="spread"), f"{TS}.allocationPolicy"),
    ("resource-not-mapping", ts("nvidia.com/gpu"), f"{TS}.resources[0]"),
    ("resource-unknown-key", ts({**GPU4, "replica": 2}), f"{TS}.resources[0].replica"),
    ("name-missing", ts({"replicas": 2}), f"{TS}.resources[0].name"),
    ("name-not-shareable", ts({"name": "amd.com/gpu", "replicas": 2}), f"{TS}.resources[0].name"),
    ("name-other-vendor", ts({"name": "example.com/gpu", "replicas": 2}), f"{TS}.resources[0].name"),
    ("replicas-missing", ts({"name": "nvidia.com/gpu"}), f"{TS}.resources[0].replicas"),
    ("replicas-one", ts({**GPU4, "replicas": 1}), f"{TS}.resources[0].replicas"),
    ("replicas-bool", ts({**GPU4, "replicas": True}), f"{TS}.resources[0].replicas"),
    ("replicas-string", ts({**GPU4, "replicas": "4"}), f"{TS}.resources[0].replicas"),
    ("replicas-huge", ts({**GPU4, "replicas": 100000}), f"{TS}.resources[0].replicas"),
    ("second-entry-named", ts(GPU4, {**GPU4, "replicas": 0}), f"{TS}.resources[1].replicas"),
    ("rename-bad-chars", ts({**GPU4, "rename": "gpu shared"}), f"{TS}.resources[0].rename"),
    ("rename-too-long", ts({**GPU4, "rename": "g" * 64}), f"{TS}.resources[0].rename"),
    ("rename-reserved-domain", ts({**GPU4, "rename": "kubernetes.io/gpu"}), f"{TS}.resources[0].rename"),
    ("rename-bad-domain", ts({**GPU4, "rename": "Nvidia_com/gpu"}), f"{TS}.resources[0].rename"),
    ("resource-policy-unknown", ts({**GPU4, "allocationPolicy": "random"}), f"{TS}.resources[0].allocationPolicy"),
    ("devices-zero", ts({**GPU4, "devices": 0}), f"{TS}.resources[0].devices"),
    ("devices-word", ts({**GPU4, "devices": "some"}), f"{TS}.resources[0].devices"),
    ("devices-empty-list", ts({**GPU4, "devices": []}), f"{TS}.resources[0].devices"),
    ("devices-index-absent", ts({**GPU4, "devices": [0, 8]}), f"{TS}.resources[0].devices[1]"),
    ("devices-uuid-absent", ts({**GPU4, "devices": ["GPU-nope"]}), f"{TS}.resources[0].devices[0]"),
    ("devices-mig-index", ts({**GPU4, "devices": ["0:1"]}), f"{TS}.resources[0].devices[0]"),
    ("devices-mig-on-gpu", ts({**GPU4, "devices": ["MIG-abc"]}), f"{TS}.resources[0].devices[0]"),
    ("devices-bool-entry", ts({**GPU4, "devices": [True]}), f"{TS}.resources[0].devices[0]"),
    ("devices-duplicate", ts({**GPU4, "devices": [1, SERVER_8[1].uuid]}), f"{TS}.resources[0].devices[1]"),
    (
        "advertised-name-twice",
        ts({**GPU4, "devices": [0]}, {**GPU4, "devices": [1]}, renameByDefault=True),
        f"{TS}.resources[1].name",
    ),
    (
        "rename-collides",
        ts({**GPU4, "rename": "small"}, {"name": "nvidia.com/mig-1g.10gb", "replicas": 2, "rename": "small"}),
        f"{TS}.resources[1].rename",
    ),
]


@pytest.mark.parametrize(("raw", "field"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_config_names_the_field(raw: Any, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_sharing(raw, gpus=SERVER_8)
    assert caught.value.field == field
    assert caught.value.message


def test_mps_message_says_why() -> None:
    with pytest.raises(ConfigError, match="not supported in device-plugin mode") as caught:
        parse_sharing({"mps": {"resources": [GPU4]}}, gpus=SERVER_8)
    assert caught.value.message == MPS_NOT_SUPPORTED


@pytest.mark.parametrize("raw", [None, {}, {"timeSlicing": None}, {"mps": None}, {"mps": {}}], ids=str)
def test_nothing_shared(raw: Any) -> None:
    config = parse_sharing(raw, gpus=SERVER_8)
    assert config.time_slicing is None
    assert config.strategy == "none"


def test_nvidia_example_parses_with_defaults() -> None:
    config = parse_sharing(ts(GPU4), gpus=SERVER_8)
    assert config.strategy == "time-slicing"
    assert config.time_slicing is not None
    (spec,) = config.time_slicing.resources
    assert (spec.name, spec.replicas, spec.advertised_name) == ("nvidia.com/gpu", 4, "nvidia.com/gpu")
    assert spec.devices.kind is SelectionKind.ALL
    assert spec.placement is Placement.DISTRIBUTED
    assert not spec.require_distinct_gpus
    assert not spec.fail_requests_greater_than_one


NAMING = [
    ("default-keeps-name", {}, {}, "nvidia.com/gpu"),
    ("renameByDefault", {"renameByDefault": True}, {}, "nvidia.com/gpu.shared"),
    ("rename-bare-gets-prefix", {}, {"rename": "gpu-small"}, "nvidia.com/gpu-small"),
    ("rename-own-domain", {}, {"rename": "example.com/tiny-gpu"}, "example.com/tiny-gpu"),
    ("rename-beats-renameByDefault", {"renameByDefault": True}, {"rename": "half"}, "nvidia.com/half"),
]


@pytest.mark.parametrize(("top", "extra", "expected"), [c[1:] for c in NAMING], ids=[c[0] for c in NAMING])
def test_advertised_name(top: dict[str, Any], extra: dict[str, Any], expected: str) -> None:
    config = parse_sharing(ts({**GPU4, **extra}, **top), gpus=SERVER_8)
    assert config.time_slicing is not None
    assert config.time_slicing.resources[0].advertised_name == expected


def test_bare_name_and_mig_name_are_accepted() -> None:
    raw = ts({"name": "gpu", "replicas": 2}, {"name": "nvidia.com/mig-1g.10gb.me", "replicas": 3})
    config = parse_sharing(raw, gpus=SERVER_8)
    assert config.time_slicing is not None
    assert [s.name for s in config.time_slicing.resources] == ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb.me"]


def test_devices_list_resolves_indices_and_uuids() -> None:
    raw = ts({**GPU4, "devices": [3, "5", SERVER_8[0].uuid]})
    config = parse_sharing(raw, gpus=SERVER_8)
    assert config.time_slicing is not None
    entries = config.time_slicing.resources[0].devices.entries
    assert [e.gpu_index for e in entries] == [3, 5, 0]
    assert entries[2].field == f"{TS}.resources[0].devices[2]"


def test_devices_count() -> None:
    config = parse_sharing(ts({**GPU4, "devices": 2}), gpus=SERVER_8)
    assert config.time_slicing is not None
    selection = config.time_slicing.resources[0].devices
    assert (selection.kind, selection.count) == (SelectionKind.COUNT, 2)


def test_extensions_per_resource_override_top_level() -> None:
    raw = ts(
        {**GPU4, "devices": [0, 1], "rename": "a"},
        {**GPU4, "devices": [2, 3], "rename": "b", "requireDistinctGPUs": False, "allocationPolicy": "distributed"},
        requireDistinctGPUs=True,
        allocationPolicy="packed",
        failRequestsGreaterThanOne=True,
    )
    config = parse_sharing(raw, gpus=SERVER_8)
    assert config.time_slicing is not None
    first, second = config.time_slicing.resources
    assert (first.require_distinct_gpus, first.placement) == (True, Placement.PACKED)
    assert (second.require_distinct_gpus, second.placement) == (False, Placement.DISTRIBUTED)
    assert first.fail_requests_greater_than_one and second.fail_requests_greater_than_one


def test_default_placement_comes_from_the_caller() -> None:
    config = parse_sharing(ts(GPU4), gpus=SERVER_8, default_placement="packed")
    assert config.time_slicing is not None
    assert config.time_slicing.resources[0].placement is Placement.PACKED


def test_bad_default_placement_is_refused() -> None:
    with pytest.raises(ConfigError, match="distributed or packed"):
        parse_sharing(ts(GPU4), gpus=SERVER_8, default_placement="spread")
