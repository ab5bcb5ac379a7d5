"""Allocate envs through ResourceManager + EnvVarResponseBuilder, and a live MIG re-layout end to end."""

from __future__ import annotations

import pytest

from device_plugin.allocation_policy import VISIBLE_DEVICES_ENV, EnvVarResponseBuilder
from device_plugin.devices import Device, Health
from device_plugin.nvml.fake import FakeNvml
from device_plugin.resources import ResourceManager
from mig.discovery import discover
from mig.policy import MigAllocationPolicy
from mig.rediscovery import apply_diff, diff_layouts
from mig.strategy import build_resources


def layout(fake: FakeNvml, strategy: str = "mixed") -> dict[str, tuple[Device, ...]]:
    inventory = discover(fake)
    return build_resources(inventory.gpus, inventory.devices_by_gpu, strategy)


def manager(name: str, devices: tuple[Device, ...]) -> ResourceManager:
    return ResourceManager(name, devices, MigAllocationPolicy(resource_name=name), EnvVarResponseBuilder())


def test_allocate_hands_out_mig_uuids_as_nvidia_visible_devices() -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    name = "nvidia.com/mig-1g.10gb"
    rm = manager(name, layout(fake)[name])
    chosen = rm.preferred_allocation([d.id for d in rm.snapshot().devices], [], 2)
    allocation = rm.allocate(list(reversed(chosen)))
    assert allocation.envs[VISIBLE_DEVICES_ENV] == ",".join(chosen)
    assert all(i.startswith("MIG-") for i in allocation.envs[VISIBLE_DEVICES_ENV].split(","))
    assert {d.gpu_indices for d in rm.snapshot().devices if d.id in chosen} == {(1,), (2,)}


def test_single_strategy_allocation_names_mig_uuids_under_nvidia_com_gpu() -> None:
    fake = FakeNvml.from_machine("a100-mig-7x1g")
    rm = manager("nvidia.com/gpu", layout(fake, "single")["nvidia.com/gpu"])
    first_of_gpu_3 = fake.mig_devices(3)[0].uuid
    assert rm.allocate([first_of_gpu_3]).envs == {VISIBLE_DEVICES_ENV: first_of_gpu_3}


def test_live_relayout_reaches_the_managers() -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    before = layout(fake)
    managers = {name: manager(name, devices) for name, devices in before.items()}
    seven_g = managers["nvidia.com/mig-7g.80gb"]
    one_g = managers["nvidia.com/mig-1g.10gb"]
    version = one_g.snapshot().version
    survivor = fake.mig_devices(2)[2].uuid  # the 1g.10gb on GPU 2 stays; mark it unhealthy first
    one_g.set_device_health([survivor], Health.UNHEALTHY, "Xid 79")

    # The operator re-partitions GPU 3 (7g.80gb -> 4g.40gb + 3g.40gb) and GPU 1 (7x 1g.10gb -> 3x 2g.20gb).
    fake.set_mig_layout(3, [{"profile": "4g.40gb", "count": 1}, {"profile": "3g.40gb", "count": 1}])
    fake.set_mig_layout(1, [{"profile": "2g.20gb", "count": 3}])
    after = layout(fake)
    diff = diff_layouts(before, after)
    assert diff.appeared == ("nvidia.com/mig-4g.40gb",)
    assert diff.changed == ("nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb")
    assert diff.disappeared == ("nvidia.com/mig-7g.80gb",)
    assert diff.unchanged == ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb.me")

    apply_diff(diff, after, managers, manager)

    gone = seven_g.wait_for_change(0, timeout_s=0)
    assert gone.closed and gone.devices == ()  # the kubelet is told: no devices left, before the server stops
    assert "nvidia.com/mig-7g.80gb" not in managers
    assert [len(managers[n].snapshot().devices) for n in sorted(managers)] == [4, 1, 1, 6, 3, 1]
    snapshot = one_g.wait_for_change(version, timeout_s=0)
    assert [d.id for d in snapshot.devices] == [survivor]
    assert snapshot.devices[0].health is Health.UNHEALTHY  # health survives a rescan
    assert diff_layouts(after, layout(fake)).empty


def test_disabling_mig_returns_the_gpu_to_nvidia_com_gpu() -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    before = layout(fake)
    fake.set_mig_layout(3, [], enabled=False)
    after = layout(fake)
    diff = diff_layouts(before, after)
    assert diff.disappeared == ("nvidia.com/mig-7g.80gb",)
    assert diff.changed == ("nvidia.com/gpu",)
    assert [d.gpu_indices for d in after["nvidia.com/gpu"]] == [(3,), (4,), (5,), (6,), (7,)]
    assert diff.describe() == "changed: nvidia.com/gpu; disappeared: nvidia.com/mig-7g.80gb"


@pytest.mark.parametrize("strategy", ["none", "single", "mixed"])
def test_rescan_without_change_is_empty(strategy: str) -> None:
    fake = FakeNvml.from_machine("a100-mig-7x1g")
    assert diff_layouts(layout(fake, strategy), layout(fake, strategy)).empty
