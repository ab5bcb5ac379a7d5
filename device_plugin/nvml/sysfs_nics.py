"""SysfsNics: the node's RDMA NICs and PCIe paths, read from sysfs (the NicSource of a real node).

What it reads, under an injectable root (tests build a fake tree in a temp dir):
- `class/infiniband/<dev>`: one entry per RDMA device, InfiniBand or Ethernet with RoCE/iWARP alike,
  so a plain Ethernet NIC without RDMA never appears. No such directory: no NICs, and nothing else
  changes.
- `class/infiniband/<dev>/device`: a link to the PCI function; its resolved path under `devices/` is
  the chain of bus ids from the root bus down (device_plugin.nvml.pcie_paths.path_from_sysfs).
- `<pci function>/numa_node` (-1 or absent: none), `<pci function>/net/*` (the netdev, first by
  name), `class/infiniband/<dev>/ports/*/rate` ("400 Gb/sec (4X NDR)"; the fastest port; absent:
  unknown).
Unreadable NICs are skipped with a warning rather than failing the daemon: they only inform
placement. Attributes are read with core/bounded_file.py (a regular file of at most one page, never
blocking): a FIFO or /dev/zero under a fake root is an unknown value, not a hang or a MemoryError.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from device_plugin.core.bounded_file import read_regular_file
from device_plugin.core.errors import ConfigError
from device_plugin.nvml.pcie_paths import path_from_sysfs
from device_plugin.nvml.types import NicInfo, nic_order_key, normalise_pci_bus_id

log = logging.getLogger(__name__)
SYSFS_ATTRIBUTE_BYTES = 4096
_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec")


class SysfsNics:
    """NicSource over `<sys_root>`; reads on every call (cheap, and only done at start-up)."""

    def __init__(self, sys_root: Path = Path("/sys")) -> None:
        self._root = sys_root

    def nics(self) -> tuple[NicInfo, ...]:
        class_dir = self._root / "class" / "infiniband"
        try:
            names = sorted(entry.name for entry in class_dir.iterdir())
        except OSError:
            return ()  # no RDMA stack or no RDMA device: no NICs
        found = []
        for name in names:
            try:
                nic = self._nic(class_dir / name, name)
            except (OSError, ValueError) as exc:
                log.warning(
                    "RDMA device %s: cannot read its sysfs entry (%s); ignoring it", name, exc
                )
                continue
            if nic is not None:
                found.append(nic)
        return tuple(sorted(found, key=nic_order_key))

    def pcie_path(self, pci_bus_id: str) -> tuple[str, ...] | None:
        device = self._root / "bus" / "pci" / "devices" / normalise_pci_bus_id(pci_bus_id)
        if not device.exists():
            return None
        return self._path_of(device, _numa_node(device))

    def _nic(self, entry: Path, name: str) -> NicInfo | None:
        device_link = entry / "device"
        if not device_link.exists():
            log.warning(
                "RDMA device %s has no PCI device (a software device such as rxe?); ignoring it",
                name,
            )
            return None
        device = Path(os.path.realpath(device_link))
        numa = _numa_node(device)
        path = self._path_of(device, numa)
        if path is None:
            log.warning("RDMA device %s: %s is not a PCI function; ignoring it", name, device)
            return None
        return NicInfo(
            name=name,
            netdev=_netdev(device),
            pci_bus_id=normalise_pci_bus_id(device.name),
            numa_node=numa,
            pcie_path=path,
            link_gbit_per_s=_fastest_port(entry / "ports"),
        )

    def _path_of(self, device: Path, numa: int | None) -> tuple[str, ...] | None:
        resolved = Path(os.path.realpath(device))
        return path_from_sysfs(resolved.parts, numa)


def _attribute(path: Path) -> str:
    """A sysfs attribute with the one bounded reader: a regular file (a FIFO or a link to /dev/zero
    under a fake root is refused, never read), at most SYSFS_ATTRIBUTE_BYTES (one page, what the
    kernel serves)."""
    return read_regular_file(path, limit=SYSFS_ATTRIBUTE_BYTES, field="sysfs").decode(
        "ascii", errors="replace"
    )


def _numa_node(device: Path) -> int | None:
    try:
        node = int(_attribute(device / "numa_node").strip())
    except (OSError, ValueError, ConfigError):
        return None
    return None if node < 0 else node


def _netdev(device: Path) -> str | None:
    try:
        names = sorted(entry.name for entry in (device / "net").iterdir())
    except OSError:
        return None
    return names[0] if names else None


def _fastest_port(ports: Path) -> float | None:
    try:
        port_dirs = list(ports.iterdir())
    except OSError:
        return None
    rates = []
    for port in port_dirs:
        try:
            match = _RATE.match(_attribute(port / "rate"))
        except (OSError, ConfigError) as exc:
            log.warning("RDMA port %s: cannot read its rate (%s); ignoring it", port, exc)
            continue
        if match:
            rates.append(float(match.group(1)))
    return max(rates) if rates else None
