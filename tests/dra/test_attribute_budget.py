"""Every shipped machine publishes at most 28 attributes and capacities per device (4 under the API's 32), and a
device a real node makes larger is degraded, least needed attribute first, never refused (issues 46, 47)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from device_plugin.dra.attribute_budget import within_limit
from device_plugin.dra.inventory import HINTS_FULL, HINTS_NONE, HINTS_SETS, build_devices
from device_plugin.dra.memory_shares import shareable
from device_plugin.dra_helper.api.slices import build_slices
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology

OWN = "gpu-device-plugin.io"


def _devices(machine: str, hints: str = HINTS_FULL) -> tuple:  # type: ignore[type-arg]
    fake = FakeNvml.from_machine(machine)
    return build_devices(fake, build_topology(fake), hints=hints)[0]


@pytest.mark.parametrize("machine", shipped_machine_names())
def test_no_shipped_machine_publishes_more_than_28_per_device(machine: str) -> None:
    assert max(len(d.attributes) + len(d.capacity) for d in _devices(machine)) <= 28


@pytest.mark.parametrize("machine", shipped_machine_names())
def test_with_memory_shares_one_attribute_and_one_capacity_more_and_still_2_under_the_limit(machine: str) -> None:
    shared = shareable(_devices(machine), OWN)
    assert max(len(d.attributes) + len(d.capacity) for d in shared) <= 30


@pytest.mark.parametrize(
    ("hints", "ours"),
    [(HINTS_FULL, 15), (HINTS_SETS, 5), (HINTS_NONE, 0)],
    ids=["full-every-hint", "sets-no-ranked-groupings", "none-of-ours"],
)
def test_placement_hints_turn_our_attributes_down(hints: str, ours: int) -> None:
    devices = _devices("dgx1-v100", hints)
    counts = {sum(1 for n, _, _ in d.attributes if n.startswith(f"{OWN}/")) for d in devices}
    assert max(counts) == ours
    assert [d.name for d in devices] == [d.name for d in _devices("dgx1-v100")]  # the same listing order
    assert all(("type", "string", "gpu") in d.attributes for d in devices)  # what the DeviceClass reads stays


def test_a_device_with_33_attributes_loses_the_least_needed_and_the_pool_still_publishes() -> None:
    device = _devices("dgx1-v100")[0]
    extra = tuple((f"{OWN}/extra{n}", "int", n) for n in range(33 - len(device.attributes) - len(device.capacity)))
    big = replace(device, attributes=device.attributes + extra)
    assert len(big.attributes) + len(big.capacity) == 33
    with pytest.raises(ValueError, match="more than 32"):
        build_slices([big], node_name="n", driver_name="gpu.gpu-device-plugin.io", generation=1)
    (fitted,), dropped = within_limit([big])
    assert len(fitted.attributes) + len(fitted.capacity) == 32
    assert dropped == {big.name: (f"{OWN}/nearestNIC",)}  # the least needed first
    assert build_slices([fitted], node_name="n", driver_name="gpu.gpu-device-plugin.io", generation=1)
    kept = {n for n, _, _ in fitted.attributes}
    assert {"type", "uuid", f"{OWN}/rankedSet2A", f"{OWN}/singleGPURank"} <= kept


def test_devices_within_the_limit_are_left_as_they_are() -> None:
    devices = _devices("hgx-h100")
    assert within_limit(devices) == (tuple(devices), {})
