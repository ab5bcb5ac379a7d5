"""NodeInventory: what one scan of the node found (GPUs, MIG devices, Topology) and the Allocator
over it.

Boundary: reading the backend and deciding whether the Allocator can be reused; nothing is served
here. Both modes take the inventory from here: the device-plugin front-end composes its resources
over it (dp/composition.py), the DRA front-end its devices. The Allocator precomputes its tables at
construction (about a second on 16 GPUs), so a rescan that finds the same Topology keeps the
previous inventory's Allocator, and a health change never builds one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from device_plugin.gpu_sets import Allocator
from device_plugin.mig.discovery import MigInventory, discover
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.types import GpuInfo
from device_plugin.topology.build import build_topology
from device_plugin.topology.model import Topology


@dataclass(frozen=True)
class NodeInventory:
    """One scan. Equal inventories (GPUs, MIG layouts and Topology) serve the same devices."""

    gpus: tuple[GpuInfo, ...]
    mig: MigInventory
    topology: Topology | None = None  # None on a node without GPUs
    allocator: Allocator | None = field(default=None, compare=False)  # follows the Topology

    @property
    def mig_gpus(self) -> frozenset[int]:
        """GPUs in MIG mode now: served through their MIG devices only."""
        return frozenset(self.mig.devices_by_gpu)


def scan_inventory(backend: NvmlBackend, previous: NodeInventory | None = None) -> NodeInventory:
    """Read GPUs, MIG layouts and the Topology; reuse `previous`'s Allocator when the Topology is
    the same."""
    mig = discover(backend)
    if not mig.gpus:
        return NodeInventory(mig.gpus, mig)
    topology = build_topology(backend)
    if previous is not None and previous.allocator is not None and previous.topology == topology:
        allocator = previous.allocator
    else:
        allocator = Allocator(topology)
    return NodeInventory(mig.gpus, mig, topology, allocator)
