"""The DRA devices of a shipped machine, built once per test process.

build_devices reads the backend afresh and builds the machine's Allocator (about a second for the 16-GPU
machine on a busy box), and dozens of table rows ask for the same machine's devices. The values are
frozen (DraDevice, Partitions): a test that needs its own build calls build_devices itself.
"""

from __future__ import annotations

from functools import cache

from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.inventory import DraDevice, build_devices
from device_plugin.dra.partitions import Partitions
from device_plugin.nvml.fake.machine import FakeNvml
from tests.allocation.machines import topology_of


@cache
def devices_of(
    machine: str, exclude: tuple[str, ...] = (), own_domain: str = OWN_DOMAIN
) -> tuple[tuple[DraDevice, ...], Partitions]:
    """build_devices of the shipped `machine`, minus the UUIDs in `exclude`."""
    return build_devices(
        FakeNvml.from_machine(machine), topology_of(machine), exclude_uuids=exclude, own_domain=own_domain
    )
