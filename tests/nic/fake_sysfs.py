"""Build a fake sysfs tree in a temp dir, laid out as the kernel lays it out.

PCI functions are directories under devices/pci<domain>:<bus>/<root port>/<switch ports...>/<function>,
with /sys/bus/pci/devices/<bdf> a symlink to them. An RDMA device lives in <function>/infiniband/<name>
with `device` pointing back up to the function, and /sys/class/infiniband/<name> links to it; its
network interface is <function>/net/<netdev>.
"""

from __future__ import annotations

import os
from pathlib import Path


def add_pci_function(root: Path, chain: list[str], *, root_bus: str = "pci0000:00", numa_node: int = 0) -> Path:
    """The directory of the PCI function at the end of `chain` (root port first), with its numa_node file."""
    device = root / "devices" / root_bus
    for part in chain:
        device = device / part
    device.mkdir(parents=True, exist_ok=True)
    (device / "numa_node").write_text(f"{numa_node}\n", encoding="ascii")
    bus_dir = root / "bus" / "pci" / "devices"
    bus_dir.mkdir(parents=True, exist_ok=True)
    link = bus_dir / chain[-1]
    if not link.is_symlink():
        link.symlink_to(os.path.relpath(device, bus_dir))
    return device


def add_rdma_device(
    root: Path, name: str, function: Path | None, *, netdev: str | None = None, rates: tuple[str, ...] = ()
) -> None:
    """An RDMA device on `function` (None: a software device with no PCI parent, like rxe)."""
    class_dir = root / "class" / "infiniband"
    class_dir.mkdir(parents=True, exist_ok=True)
    if function is None:
        entry = root / "devices" / "virtual" / "infiniband" / name
        entry.mkdir(parents=True)
    else:
        entry = function / "infiniband" / name
        entry.mkdir(parents=True)
        (entry / "device").symlink_to(os.path.relpath(function, entry))
        if netdev is not None:
            (function / "net" / netdev).mkdir(parents=True)
    for port, rate in enumerate(rates, start=1):
        (entry / "ports" / str(port)).mkdir(parents=True)
        (entry / "ports" / str(port) / "rate").write_text(rate + "\n", encoding="ascii")
    (class_dir / name).symlink_to(os.path.relpath(entry, class_dir))


def add_plain_netdev(root: Path, function: Path, netdev: str) -> None:
    """An Ethernet interface without RDMA: it shows in class/net only."""
    (function / "net" / netdev).mkdir(parents=True)
    net_class = root / "class" / "net"
    net_class.mkdir(parents=True, exist_ok=True)
    (net_class / netdev).symlink_to(os.path.relpath(function / "net" / netdev, net_class))
