"""MIG strategies on the shipped machines: resource names, counts, NUMA nodes and refusals."""

from __future__ import annotations

import pytest

from device_plugin.core.errors import ConfigError
from device_plugin.core.mig_strategy import MigStrategy
from device_plugin.mig.discovery import discover
from device_plugin.mig.strategy import build_resources, mig_resource
from device_plugin.nvml.fake.machine import FakeNvml


def resources_of(machine: str, strategy: str, fake: FakeNvml | None = None) -> dict[str, tuple]:
    fake = fake or FakeNvml.from_machine(machine)
    inventory = discover(fake)
    return build_resources(inventory.gpus, inventory.devices_by_gpu, strategy)


def counts(resources: dict[str, tuple]) -> dict[str, int]:
    return {name: len(devices) for name, devices in resources.items()}


# The shipped h100-mig-mixed machine under migStrategy mixed (also checked over the kubelet stand-in).
H100_MIG_MIXED_RESOURCES = {
    "nvidia.com/gpu": 4,
    "nvidia.com/mig-1g.10gb": 8,
    "nvidia.com/mig-1g.10gb.me": 1,
    "nvidia.com/mig-2g.20gb": 3,
    "nvidia.com/mig-3g.40gb": 2,
    "nvidia.com/mig-7g.80gb": 1,
}
CASES = [
    ("a100-mig-7x1g", "none", {}),
    ("a100-mig-7x1g", "single", {"nvidia.com/gpu": 56}),
    ("a100-mig-7x1g", "mixed", {"nvidia.com/mig-1g.5gb": 56}),
    ("h100-mig-mixed", "none", {"nvidia.com/gpu": 4}),
    ("h100-mig-mixed", "mixed", H100_MIG_MIXED_RESOURCES),
    ("dgx-a100", "none", {"nvidia.com/gpu": 8}),
    ("dgx-a100", "single", {"nvidia.com/gpu": 8}),
    ("dgx-a100", "mixed", {"nvidia.com/gpu": 8}),
]


@pytest.mark.parametrize(("machine", "strategy", "expected"), CASES, ids=[f"{m}-{s}" for m, s, _ in CASES])
def test_resource_names_and_counts(machine: str, strategy: str, expected: dict[str, int]) -> None:
    assert counts(resources_of(machine, strategy)) == expected


def test_none_leaves_mig_enabled_gpus_out_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    resources = resources_of("h100-mig-mixed", "none")
    assert [d.gpu_indices for d in resources["nvidia.com/gpu"]] == [(4,), (5,), (6,), (7,)]
    assert sum("GPU 0" in r.message and "not advertised" in r.message for r in caplog.records) == 1


def test_single_advertises_mig_uuids_with_parent_and_numa() -> None:
    fake = FakeNvml.from_machine("a100-mig-7x1g")
    devices = resources_of("a100-mig-7x1g", "single", fake)["nvidia.com/gpu"]
    numa = {gpu.index: gpu.numa_node for gpu in fake.gpus()}
    mig_uuids = {d.uuid: d.parent_index for i in range(8) for d in fake.mig_devices(i)}
    assert {d.id: d.gpu_indices[0] for d in devices} == mig_uuids
    assert all(d.numa_node == numa[d.gpu_indices[0]] for d in devices)
    assert {d.numa_node for d in devices} == {1, 3, 5, 7}


def test_mixed_keeps_parent_numa_on_mig_devices() -> None:
    resources = resources_of("h100-mig-mixed", "mixed")
    assert all(d.numa_node == 0 for name, ds in resources.items() if "mig-" in name for d in ds)
    assert {d.numa_node for d in resources["nvidia.com/gpu"]} == {1}


REFUSED = [
    ("several-profiles-and-whole-gpus", "h100-mig-mixed", None, "MIG enabled on every GPU or on none"),
    ("mig-gpu-without-devices", "a100-mig-7x1g", (3, [], True), "GPUs [3] have MIG enabled but no MIG devices"),
    ("two-profiles", "a100-mig-7x1g", (3, [{"profile": "7g.40gb", "count": 1}], True), "one MIG profile"),
]


@pytest.mark.parametrize(("machine", "relayout", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_single_refuses_other_layouts(machine: str, relayout: tuple | None, message: str) -> None:
    fake = FakeNvml.from_machine(machine)
    if relayout is not None:
        index, devices, enabled = relayout
        fake.set_mig_layout(index, devices, enabled=enabled)
    with pytest.raises(ConfigError) as raised:
        resources_of(machine, "single", fake)
    assert raised.value.field == "flags.migStrategy"
    assert message in raised.value.message


def test_mixed_warns_on_a_mig_gpu_without_devices(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    fake.set_mig_layout(3, [])
    resources = resources_of("h100-mig-mixed", "mixed", fake)
    assert "nvidia.com/mig-7g.80gb" not in resources
    assert any("GPU 3" in r.message and "no MIG devices" in r.message for r in caplog.records)


def test_unknown_strategy_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as raised:
        MigStrategy.parse("auto")
    assert raised.value.field == "flags.migStrategy"


@pytest.mark.parametrize(
    ("profile", "name"),
    [("1g.10gb", "nvidia.com/mig-1g.10gb"), ("1g.10gb+me", "nvidia.com/mig-1g.10gb.me")],
    ids=["plain", "plus-becomes-dot"],
)
def test_mig_resource_names(profile: str, name: str) -> None:
    assert mig_resource(profile) == name


def test_result_does_not_depend_on_gpu_order() -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    inventory = discover(fake)
    forward = build_resources(inventory.gpus, inventory.devices_by_gpu, "mixed")
    shuffled = dict(reversed(list(inventory.devices_by_gpu.items())))
    assert build_resources(tuple(reversed(inventory.gpus)), shuffled, "mixed") == forward
