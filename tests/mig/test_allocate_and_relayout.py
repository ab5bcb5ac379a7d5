"""Allocate envs through ResourceManager + EnvVarResponseBuilder. (A live re-layout: tests/daemon.)"""

from __future__ import annotations

from device_plugin.allocation.protocols import VISIBLE_DEVICES_ENV
from device_plugin.allocation.resources import ResourceManager
from device_plugin.core.devices import Device
from device_plugin.mig.discovery import discover
from device_plugin.mig.policy import MigAllocationPolicy
from device_plugin.mig.strategy import build_resources
from device_plugin.nvml.fake.machine import FakeNvml
from testbed.allocation_doubles import EnvVarResponseBuilder


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
