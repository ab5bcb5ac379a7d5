"""Frozen value types that NVML backends return. No handles, no pynvml objects."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from device_plugin.core.ascii_digits import is_ascii_digits


class PcieLevel(IntEnum):
    """Closest common PCIe ancestor of two GPUs, with NVML's nvmlGpuTopologyLevel_t values.

    Lower is closer. Names follow `nvidia-smi topo -m`: PIX, PXB, PHB, NODE, SYS.
    """

    INTERNAL = 0  # the same board (multi-GPU board); not produced by machine descriptions
    SINGLE_SWITCH = 10  # PIX
    MULTIPLE_SWITCHES = 20  # PXB
    HOST_BRIDGE = 30  # PHB
    NODE = 40  # NODE: same CPU socket / NUMA node, different host bridges
    SYSTEM = 50  # SYS: across the CPU interconnect

    @property
    def short_name(self) -> str:
        return _SHORT_NAMES[self]


_SHORT_NAMES = {
    PcieLevel.INTERNAL: "BRD",
    PcieLevel.SINGLE_SWITCH: "PIX",
    PcieLevel.MULTIPLE_SWITCHES: "PXB",
    PcieLevel.HOST_BRIDGE: "PHB",
    PcieLevel.NODE: "NODE",
    PcieLevel.SYSTEM: "SYS",
}


@dataclass(frozen=True)
class SystemInfo:
    driver_version: str
    cuda_driver_version: str  # e.g. "12.4"; "" when the backend cannot tell


@dataclass(frozen=True)
class GpuInfo:
    """One physical GPU as NVML reports it. `index` is the NVML index."""

    index: int
    uuid: str
    name: str
    memory_mib: int
    pci_bus_id: str  # normalised "0000:06:00.0" (lower-case, 4-digit domain)
    numa_node: int | None  # None when the platform does not report one


@dataclass(frozen=True)
class NvLinkInfo:
    """One NVLink of a GPU: its state and what is at the other end."""

    link: int
    active: bool
    remote_pci_bus_id: str
    remote_is_nvswitch: bool


def normalise_pci_bus_id(bus_id: str) -> str:
    """NVML reports "00000000:06:00.0"; sysfs uses "0000:06:00.0". Use the sysfs form,
    lower-case."""
    text = bus_id.strip().lower()
    domain, _, rest = text.partition(":")
    if not rest:
        return text
    return f"{int(domain, 16):04x}:{rest}"


@dataclass(frozen=True)
class NicInfo:
    """One RDMA network device (InfiniBand, or Ethernet with RoCE) and where it sits on PCIe.

    NICs are not NVML objects: the fake reads them from the machine description, the real side from
    sysfs (device_plugin.nvml.sysfs_nics). `pcie_path` has the format of a GPU's path in a machine
    description: [0] CPU socket, [1] host bridge, [2:] PCIe switches, root first.
    """

    name: str  # the RDMA device, e.g. "mlx5_0" (what NCCL_IB_HCA lists)
    netdev: str | None  # the network interface of the same PCI function, e.g. "ibp12s0"; None: none
    pci_bus_id: str  # normalised "0000:0c:00.0"
    numa_node: int | None  # None when the platform does not report one
    pcie_path: tuple[str, ...]
    link_gbit_per_s: float | None  # the fastest port's rate in Gbit/s; None when unknown


def nic_order_key(nic: NicInfo) -> tuple[object, ...]:
    """NICs are listed by name with digit runs compared as numbers: mlx5_2 before mlx5_10."""
    return tuple(
        int(part) if is_ascii_digits(part) else part for part in re.split(r"([0-9]+)", nic.name)
    )
