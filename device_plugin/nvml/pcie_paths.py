"""PCIe paths: the closest common ancestor of two devices, and turning a sysfs device path into a path.

A path is root first: [0] the CPU socket (NUMA node), [1] the host bridge, [2:] the PCIe switches on the
way down. Machine descriptions write these by hand; on a real node sysfs_nics.py derives them from the
resolved sysfs directory of a PCI device. The one rule below ranks GPU-GPU and GPU-NIC pairs alike,
with the names `nvidia-smi topo -m` uses. Pure functions on strings: no I/O.
"""

from __future__ import annotations

import re

from device_plugin.nvml.types import PcieLevel

UNKNOWN_SOCKET = "cpu?"  # [0] of a device whose NUMA node the platform does not report
_BUS_ID = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_ROOT_BUS = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")


def pcie_level_of_paths(a: tuple[str, ...], b: tuple[str, ...]) -> PcieLevel:
    """Closest common PCIe ancestor of two devices from their root-first paths."""
    if len(a) >= 3 and len(b) >= 3 and a[-1] == b[-1]:
        return PcieLevel.SINGLE_SWITCH
    if set(a[2:]) & set(b[2:]):
        return PcieLevel.MULTIPLE_SWITCHES
    if len(a) >= 2 and len(b) >= 2 and a[1] == b[1]:
        return PcieLevel.HOST_BRIDGE
    if a[0] == b[0]:
        return PcieLevel.NODE
    return PcieLevel.SYSTEM


def socket_name(numa_node: int | None) -> str:
    return UNKNOWN_SOCKET if numa_node is None else f"cpu{numa_node}"


def path_from_sysfs(parts: tuple[str, ...], numa_node: int | None) -> tuple[str, ...] | None:
    """The PCIe path of the device at the end of a resolved sysfs path, given as its components.

    `parts` is e.g. ("devices", "pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:08.0",
    "0000:05:00.0"): the root bus, the root port, then per PCIe switch its upstream and downstream port,
    then the device. A switch is named by its upstream port, so two devices below one switch share that
    name whatever downstream port they use. A device right under the root bus (a VM that hides the
    PCIe tree) gets no switches. None when the parts hold no root bus or do not end in a PCI device.
    """
    roots = [i for i, part in enumerate(parts) if _ROOT_BUS.match(part)]
    if not roots:
        return None
    root = roots[-1]
    chain = parts[root + 1 :]
    if not chain or not all(_BUS_ID.match(part) for part in chain):
        return None
    bridges = chain[:-1]  # [root port, up1, down1, up2, down2, ...]
    switches = bridges[1::2]  # upstream ports, root first
    return (socket_name(numa_node), parts[root], *switches)
