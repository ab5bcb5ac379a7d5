"""Shared helpers: topologies and allocators of the shipped machines, built once per test session."""

from __future__ import annotations

from functools import cache

from device_plugin.gpu_sets import Allocator
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from device_plugin.topology.model import Topology


@cache
def topology_of(machine: str) -> Topology:
    return build_topology(FakeNvml.from_machine(machine))


@cache
def allocator_of(machine: str) -> Allocator:
    return Allocator(topology_of(machine))


def machines_up_to(gpus: int) -> list[str]:
    return [name for name in shipped_machine_names() if topology_of(name).gpu_count <= gpus]
