"""The `mig:` key of machine descriptions, the fake's MIG state and runtime re-layout."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from device_plugin.core.errors import MachineDescriptionError, NvmlError
from device_plugin.nvml.fake.description import parse_machine_description
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.mig_types import MigMode


def machine(*gpus: dict[str, Any]) -> dict[str, Any]:
    return {"name": "t", "gpus": list(gpus)}


def gpu(model: str = "NVIDIA A100-SXM4-40GB", mig: object = None, memory_mib: int = 40960) -> dict[str, Any]:
    entry: dict[str, Any] = {"model": model, "memory_mib": memory_mib}
    if mig is not None:
        entry["mig"] = mig
    return entry


def test_a100_mig_7x1g_has_seven_1g_5gb_on_every_gpu() -> None:
    fake = FakeNvml.from_machine("a100-mig-7x1g")
    for info in fake.gpus():
        assert fake.mig_mode(info.index) == MigMode(current=True, pending=True)
        devices = fake.mig_devices(info.index)
        assert [d.profile for d in devices] == ["1g.5gb"] * 7
        assert [d.placement_start for d in devices] == list(range(7))
        assert all(d.parent_uuid == info.uuid and d.memory_mib == 4864 for d in devices)


def test_h100_mig_mixed_layouts() -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    layout = {i: [(d.profile, d.placement_start) for d in fake.mig_devices(i)] for i in range(8)}
    assert layout[0] == [("2g.20gb", 0), ("2g.20gb", 2), ("3g.40gb", 4)]
    assert layout[1] == [("1g.10gb", s) for s in range(7)]
    assert layout[2] == [("2g.20gb", 0), ("1g.10gb+me", 2), ("1g.10gb", 3), ("3g.40gb", 4)]
    assert layout[3] == [("7g.80gb", 0)]
    assert all(layout[i] == [] for i in range(4, 8))
    assert fake.mig_mode(4) == MigMode(False, False)


def test_mig_uuids_are_unique_and_well_formed_across_the_node() -> None:
    fake = FakeNvml.from_machine("a100-mig-7x1g")
    uuids = [d.uuid for i in range(8) for d in fake.mig_devices(i)]
    assert len(set(uuids)) == 56
    assert all(u.startswith("MIG-") and len(u) == 40 for u in uuids)


def test_non_mig_model_reports_no_mig_mode() -> None:
    fake = FakeNvml.from_machine("dgx1-v100")
    assert fake.mig_mode(0) is None
    assert fake.mig_devices(0) == ()


def test_pending_mode_is_reported() -> None:
    fake = FakeNvml(parse_machine_description(machine(gpu(mig={"enabled": False, "pending": True}))))
    assert fake.mig_mode(0) == MigMode(current=False, pending=True)
    assert fake.mig_devices(0) == ()


INVALID = [
    (
        "profile-the-model-lacks",
        gpu(mig={"enabled": True, "devices": [{"profile": "1g.10gb", "count": 1}, {"profile": "3g.40gb", "count": 1}]}),
        "gpus[0].mig.devices[1].profile",
    ),
    (
        "too-many-of-one-profile",
        gpu(mig={"enabled": True, "devices": [{"profile": "1g.5gb", "count": 8}]}),
        "gpus[0].mig.devices[0].count",
    ),
    (
        "more-slices-than-the-gpu",
        gpu(mig={"enabled": True, "devices": [{"profile": "4g.20gb", "count": 1}, {"profile": "2g.10gb", "count": 2}]}),
        "gpus[0].mig.devices",
    ),
    (
        "overlapping-placements",
        gpu(mig={"enabled": True, "devices": [{"profile": "3g.20gb", "start": 0}, {"profile": "2g.10gb", "start": 2}]}),
        "gpus[0].mig.devices[1].start",
    ),
    (
        "start-not-a-placement",
        gpu(mig={"enabled": True, "devices": [{"profile": "2g.10gb", "start": 1}]}),
        "gpus[0].mig.devices[0].start",
    ),
    (
        "mig-on-a-non-mig-model",
        gpu(model="Tesla V100-SXM2-32GB", memory_mib=32768, mig={"enabled": True}),
        "gpus[0].mig.enabled",
    ),
    (
        "devices-while-disabled",
        gpu(mig={"enabled": False, "devices": [{"profile": "1g.5gb", "count": 1}]}),
        "gpus[0].mig.devices",
    ),
    ("enabled-missing", gpu(mig={"devices": []}), "gpus[0].mig.enabled"),
    ("enabled-not-a-bool", gpu(mig={"enabled": "yes"}), "gpus[0].mig.enabled"),
    ("unknown-key", gpu(mig={"enabled": True, "profiles": []}), "gpus[0].mig.profiles"),
    (
        "count-and-start",
        gpu(mig={"enabled": True, "devices": [{"profile": "1g.5gb", "count": 1, "start": 0}]}),
        "gpus[0].mig.devices[0].start",
    ),
    (
        "zero-count",
        gpu(mig={"enabled": True, "devices": [{"profile": "1g.5gb", "count": 0}]}),
        "gpus[0].mig.devices[0].count",
    ),
    (
        "second-media-extension",
        gpu(
            mig={
                "enabled": True,
                "devices": [{"profile": "1g.5gb+me", "start": 0}, {"profile": "1g.5gb+me", "start": 1}],
            }
        ),
        "gpus[0].mig.devices[1].start",
    ),
    (
        "no-placement-fits",
        gpu(
            mig={
                "enabled": True,
                "devices": [
                    {"profile": "1g.5gb", "start": 4},
                    {"profile": "4g.20gb", "count": 1},
                    {"profile": "2g.10gb", "count": 1},
                ],
            }
        ),
        "gpus[0].mig.devices",
    ),
]


@pytest.mark.parametrize(("description", "field"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_impossible_layout_is_refused_naming_the_field(description: dict[str, Any], field: str) -> None:
    with pytest.raises(MachineDescriptionError) as raised:
        parse_machine_description(machine(description))
    assert raised.value.field == field


def test_counted_profiles_are_placed_around_explicit_ones() -> None:
    mig = {
        "enabled": True,
        "devices": [
            {"profile": "1g.5gb", "start": 0},
            {"profile": "3g.20gb", "count": 1},
            {"profile": "1g.5gb", "count": 1},
            {"profile": "2g.10gb", "count": 1},
        ],
    }
    description = parse_machine_description(machine(gpu(mig=mig)))
    fake = FakeNvml(description)
    assert [(d.profile, d.placement_start) for d in fake.mig_devices(0)] == [
        ("1g.5gb", 0),
        ("1g.5gb", 1),
        ("2g.10gb", 2),
        ("3g.20gb", 4),
    ]


def test_mig_key_in_a_yaml_file_round_trips() -> None:
    text = yaml.safe_dump(machine(gpu(mig={"enabled": True, "devices": [{"profile": "7g.40gb", "count": 1}]})))
    from device_plugin.nvml.fake.description import parse_machine_yaml

    described = parse_machine_yaml(text)
    assert described.gpus[0].mig is not None
    assert [p.profile.name for p in described.gpus[0].mig.placements] == ["7g.40gb"]


def test_set_mig_layout_changes_devices_and_keeps_surviving_uuids() -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    before = {d.placement_start: d for d in fake.mig_devices(0)}
    after = fake.set_mig_layout(0, [{"profile": "2g.20gb", "start": 0}, {"profile": "1g.10gb", "count": 4}])
    assert after == fake.mig_devices(0)
    assert [(d.profile, d.placement_start) for d in after] == [("2g.20gb", 0)] + [("1g.10gb", s) for s in (2, 3, 4, 5)]
    assert after[0].uuid == before[0].uuid  # the 2g.20gb at 0 survived
    assert {d.uuid for d in after[1:]}.isdisjoint(d.uuid for d in before.values())


def test_set_mig_layout_can_enable_and_disable_mig() -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    fake.set_mig_layout(5, [{"profile": "7g.80gb", "count": 1}])
    assert fake.mig_mode(5) == MigMode(True, True)
    fake.set_mig_layout(0, [], enabled=False)
    assert fake.mig_mode(0) == MigMode(False, False)
    assert fake.mig_devices(0) == ()


def test_impossible_set_mig_layout_keeps_the_old_layout() -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    before = fake.mig_devices(1)
    with pytest.raises(MachineDescriptionError) as raised:
        fake.set_mig_layout(1, [{"profile": "1g.10gb", "count": 8}])
    assert raised.value.field == "gpus[1].mig.devices[0].count"
    assert fake.mig_devices(1) == before


def test_mig_calls_on_a_closed_or_missing_gpu_fail_like_nvml() -> None:
    fake = FakeNvml.from_machine("a100-mig-7x1g")
    with pytest.raises(NvmlError):
        fake.mig_devices(8)
    fake.close()
    with pytest.raises(NvmlError):
        fake.mig_mode(0)
