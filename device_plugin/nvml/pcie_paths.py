"""PCIe paths: the closest common ancestor of two devices, a device's root complex, and sysfs paths
as paths.

A path is root first: [0] the CPU socket (NUMA node), [1] the host bridge (root complex), [2:] the
PCIe switches on the way down. Machine descriptions write these by hand; on a real node
sysfs_nics.py derives them from the resolved sysfs directory of a PCI device. The one rule below
ranks GPU-GPU and GPU-NIC pairs alike, with the names `nvidia-smi topo -m` uses; `pcie_roots` names
each device's root complex in the form of Kubernetes' `resource.kubernetes.io/pcieRoot`. Pure
functions on strings: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from device_plugin.nvml.types import PcieLevel

UNKNOWN_SOCKET = "cpu?"  # [0] of a device whose NUMA node the platform does not report
_BUS_ID = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")
_ROOT_BUS = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}\Z")
# Root complexes a machine description names in free text get root bus names from this PCI domain
# up: the description tells which devices share a root complex, not its bus number (see pcie_roots).
SYNTHETIC_ROOT_DOMAIN = 0xFC00


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
    "0000:05:00.0"): the root bus, the root port, then per PCIe switch its upstream and downstream
    port, then the device. A switch is named by its upstream port, so two devices below one switch
    share that name whatever downstream port they use. A device right under the root bus (a VM that
    hides the PCIe tree) gets no switches. None when the parts hold no root bus or do not end in a
    PCI device. [1] is the first root bus on the way (the one Kubernetes' pcieRoot names); behind a
    nested PCI domain (Intel VMD: `pci0000:00/0000:00:0e.0/pci10000:00/...`) the switches are those
    below the last.
    """
    roots = [i for i, part in enumerate(parts) if _ROOT_BUS.match(part)]
    if not roots:
        return None
    chain = parts[roots[-1] + 1 :]
    if not chain or not all(_BUS_ID.match(part) for part in chain):
        return None
    bridges = chain[:-1]  # [root port, up1, down1, up2, down2, ...]
    switches = bridges[1::2]  # upstream ports, root first
    return (socket_name(numa_node), parts[roots[0]], *switches)


def is_root_bus_name(name: str) -> bool:
    """True for `pci<domain>:<bus>`, the name sysfs gives a root bus (and Kubernetes' pcieRoot
    uses)."""
    return bool(_ROOT_BUS.match(name))


def pcie_roots(paths: Sequence[tuple[str, ...] | None]) -> tuple[str | None, ...]:
    """Each device's root complex as `pci<domain>:<bus>`, from its path's host bridge ([1]); None
    without one.

    A sysfs path's [1] is already the root bus name. A machine description may name a host bridge in
    free text (`cpu0-rp0`): it says which devices share that root complex but not its bus number, so
    such a bridge gets a synthetic name, `pcifc00:00`, `pcifc00:01`, ... in order of first use here
    (domain SYNTHETIC_ROOT_DOMAIN upwards, skipping names the paths use themselves). Equal bridges
    get equal names, distinct ones distinct names: what matching on pcieRoot relies on. A path with
    no [1] (only a socket) gives None: the description says nothing of its root complex.
    """
    bridges = [path[1] if path is not None and len(path) >= 2 else None for path in paths]
    taken = {bridge for bridge in bridges if bridge is not None and is_root_bus_name(bridge)}
    names: dict[str, str] = {}
    serial = 0
    for bridge in bridges:
        if bridge is None or bridge in taken or bridge in names:
            continue
        while (name := _synthetic_root(serial)) in taken:
            serial += 1
        names[bridge] = name
        serial += 1
    return tuple(None if bridge is None else names.get(bridge, bridge) for bridge in bridges)


def _synthetic_root(serial: int) -> str:
    return f"pci{SYNTHETIC_ROOT_DOMAIN + serial // 256:04x}:{serial % 256:02x}"
