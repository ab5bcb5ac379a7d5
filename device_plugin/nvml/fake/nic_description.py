"""The `nics:` list of a machine description: parse and validate it into NicInfo values.

Each entry is one RDMA device (InfiniBand, or Ethernet with RoCE):

    nics:
      - {name: mlx5_0, netdev: ibp12s0, pci_bus_id: "0000:0c:00.0", numa_node: 0,
         pcie: [cpu0, cpu0-rp0, pex0], link_gbps: 400}

`name` is required; `netdev` (a network interface name), `pci_bus_id` (default: one per NIC from bus
0xe0 of PCI domain 0xfd00 upwards, apart from GPUs'), `numa_node` (0..1023 or null; default 0),
`pcie` (the same format as a GPU's path; default [cpu<numa_node>]) and `link_gbps` (the port rate in
Gbit/s) are optional. Errors name the field ("nics[2].numa_node"). NIC paths must fit the PCIe tree
the GPUs' paths draw, and a NIC under a GPU's host bridge must sit on that GPU's NUMA node.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from device_plugin.core.errors import MachineDescriptionError
from device_plugin.nvml.fake.description_fields import integer, kind, mapping, string
from device_plugin.nvml.pcie_paths import socket_name
from device_plugin.nvml.types import NicInfo, normalise_pci_bus_id

NIC_KEYS = frozenset({"name", "netdev", "pci_bus_id", "numa_node", "pcie", "link_gbps"})
MAX_LINK_GBPS = 3200  # beyond any single port shipped or announced (1.6 Tb/s is the next step)
_MAX_NUMA_NODE = 1023
# RDMA device names: mlx5_0, bnxt_re1, irdma0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_NETDEV = re.compile(r"^[A-Za-z0-9_.:-]{1,15}\Z")  # Linux IFNAMSIZ is 16 with the terminating NUL
_LOOSE_BUS_ID = re.compile(r"^[0-9a-f]{1,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")  # any domain width
_PCI_BUS_ID = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")


def default_nic_bus_id(index: int) -> str:
    domain, offset = divmod(index, 0x20)
    return f"{0xFD00 + domain:04x}:{0xE0 + offset:02x}:00.0"


def parse_nics(
    raw: object, gpu_paths: Sequence[tuple[str, tuple[str, ...], int | None, str]]
) -> tuple[NicInfo, ...]:
    """The validated NICs of `raw` (the `nics:` value, None when absent).

    `gpu_paths` holds, per GPU, (field name, PCIe path, NUMA node, PCI bus id); the GPUs are already
    valid.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise MachineDescriptionError("nics", f"must be a list, not {kind(raw)}")
    nics = tuple(_parse_nic(entry, i) for i, entry in enumerate(raw))
    _check_unique(nics, gpu_paths)
    _check_tree(nics, gpu_paths)
    return nics


def _parse_nic(raw: object, index: int) -> NicInfo:
    where = f"nics[{index}]"
    raw = mapping(raw, where, NIC_KEYS, ("name",))
    name = string(raw["name"], f"{where}.name")
    if not _NAME.match(name):
        raise MachineDescriptionError(
            f"{where}.name", f"{name!r} is not an RDMA device name like mlx5_0"
        )
    netdev = None
    if raw.get("netdev") is not None:
        netdev = string(raw["netdev"], f"{where}.netdev")
        if not _NETDEV.match(netdev):
            raise MachineDescriptionError(
                f"{where}.netdev", f"{netdev!r} is not an interface name (1-15 characters)"
            )
    bus_id = default_nic_bus_id(index)
    if "pci_bus_id" in raw:
        bus_id = string(raw["pci_bus_id"], f"{where}.pci_bus_id").lower()
        if _LOOSE_BUS_ID.match(bus_id):
            bus_id = normalise_pci_bus_id(bus_id)
        if not _PCI_BUS_ID.match(bus_id):
            raise MachineDescriptionError(
                f"{where}.pci_bus_id", f"{bus_id!r} is not a PCI address like 0000:0c:00.0"
            )
    numa_node: int | None = 0
    if "numa_node" in raw:
        value = raw["numa_node"]
        numa_node = (
            None if value is None else integer(value, f"{where}.numa_node", 0, _MAX_NUMA_NODE)
        )
    pcie: tuple[str, ...] = (socket_name(numa_node if numa_node is not None else 0),)
    if "pcie" in raw:
        if not isinstance(raw["pcie"], list) or not raw["pcie"]:
            raise MachineDescriptionError(
                f"{where}.pcie", "must be a non-empty list, e.g. [cpu0, cpu0-rp0, pex0]"
            )
        pcie = tuple(string(part, f"{where}.pcie[{i}]") for i, part in enumerate(raw["pcie"]))
    link: float | None = None
    if raw.get("link_gbps") is not None:
        rate = raw["link_gbps"]
        if isinstance(rate, bool) or not isinstance(rate, int | float):
            raise MachineDescriptionError(
                f"{where}.link_gbps", f"must be a number, not {kind(rate)}"
            )
        if not 0 < rate <= MAX_LINK_GBPS:
            raise MachineDescriptionError(
                f"{where}.link_gbps", f"{rate} is not in (0, {MAX_LINK_GBPS}] Gbit/s"
            )
        link = float(rate)
    return NicInfo(name, netdev, bus_id, numa_node, pcie, link)


def _check_unique(
    nics: tuple[NicInfo, ...], gpu_paths: Sequence[tuple[str, tuple[str, ...], int | None, str]]
) -> None:
    names: dict[str, int] = {}
    bus_ids = {bus: field for field, _, _, bus in gpu_paths}
    for i, nic in enumerate(nics):
        if nic.name in names:
            raise MachineDescriptionError(
                f"nics[{i}].name", f"{nic.name!r} is already nics[{names[nic.name]}]"
            )
        if nic.pci_bus_id in bus_ids:
            raise MachineDescriptionError(
                f"nics[{i}].pci_bus_id", f"same as {bus_ids[nic.pci_bus_id]}"
            )
        names[nic.name] = i
        bus_ids[nic.pci_bus_id] = f"nics[{i}]"


def _check_tree(
    nics: tuple[NicInfo, ...], gpu_paths: Sequence[tuple[str, tuple[str, ...], int | None, str]]
) -> None:
    """A component sits at one depth under one parent in every path (GPUs' first); NUMA follows the
    host bridge."""
    placed: dict[str, tuple[int, str | None, str]] = {}
    bridge_numa: dict[str, tuple[int, str]] = {}
    entries = [(field, path, numa) for field, path, numa, _ in gpu_paths]
    entries += [(f"nics[{i}]", nic.pcie_path, nic.numa_node) for i, nic in enumerate(nics)]
    for field, path, numa in entries:
        for depth, part in enumerate(path):
            parent = path[depth - 1] if depth else None
            if part in path[:depth]:
                raise MachineDescriptionError(
                    f"{field}.pcie[{depth}]", f"{part!r} repeats in the path"
                )
            seen = placed.setdefault(part, (depth, parent, field))
            if seen[:2] != (depth, parent):
                raise MachineDescriptionError(
                    f"{field}.pcie[{depth}]",
                    f"{part!r} sits under {parent!r} at depth {depth} here but under {seen[1]!r} "
                    "at depth "
                    f"{seen[0]} in {seen[2]}; PCIe paths must form a tree",
                )
        if len(path) >= 2 and numa is not None:
            other = bridge_numa.setdefault(path[1], (numa, field))
            if other[0] != numa:
                raise MachineDescriptionError(
                    f"{field}.numa_node",
                    f"{numa}, but {other[1]} under the same host bridge {path[1]!r} is on NUMA "
                    f"node {other[0]}",
                )
