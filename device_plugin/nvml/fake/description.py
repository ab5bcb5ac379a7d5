"""Machine-description files: parse and validate the YAML that the fake NVML backend models.

The schema is fixed by the foundation issue (issue 2) and is binding: other tools write these files.
This module only turns a YAML document into frozen value objects, or raises MachineDescriptionError
naming the offending field with a dotted path ("gpus[3].numa_node"). It knows nothing about NVML
calls; device_plugin.nvml.fake.machine turns a description into backend answers.
The `nvlinks:`/`nvswitch:` keys are parsed in link_description.py, `mig:` in mig_description.py,
`nics:` in nic_description.py, `fabric:` and `imex_channels:` in fabric_description.py;
files are read with the config file's limits (core/bounded_file.py, core/bounded_yaml.py: a regular
file, never blocking, at most MAX_MACHINE_BYTES; no anchors, at most 32 levels of nesting, no
duplicate keys); description_fields.py holds the typed readers this module and link_description.py
use.

Extending the schema (for example a per-GPU `mig:` key): add the key to `_GPU_KEYS`, a field with a
default to `GpuDescription`, and parse it in `_parse_gpu`. Unknown keys stay errors.
"""

from __future__ import annotations

import re
import uuid as uuid_lib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from device_plugin.core.bounded_file import read_regular_file
from device_plugin.core.bounded_yaml import load_yaml_text
from device_plugin.core.errors import ConfigError, MachineDescriptionError
from device_plugin.nvml.fabric_types import NO_FABRIC, FabricInfo
from device_plugin.nvml.fake import description_fields as read
from device_plugin.nvml.fake.fabric_description import (
    gpu_fabric,
    parse_fabric_keys,
    parse_imex_channels,
)
from device_plugin.nvml.fake.link_description import (
    NvLinkBundle,
    NvSwitchDomain,
    check_link_totals,
    parse_nvlinks,
    parse_nvswitch,
)
from device_plugin.nvml.fake.mig_description import MigLayout, parse_mig
from device_plugin.nvml.fake.nic_description import parse_nics
from device_plugin.nvml.types import NicInfo, normalise_pci_bus_id

DEFAULT_DRIVER_VERSION = "550.54.15"
MAX_MACHINE_BYTES = 1024 * 1024  # the largest shipped description is a few KiB
_MAX_NUMA_NODE = 1023  # Linux's default CONFIG_NODES_SHIFT allows 1024 nodes at most
# fixed: defaults must be stable
_UUID_NAMESPACE = uuid_lib.UUID("6f1d3c0e-9a43-4b1e-8f1e-2d5c1f0a7b11")
_PCI_BUS_ID = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")
_UUID = re.compile(r"^GPU-[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\Z")

_TOP_KEYS = frozenset(
    {"name", "driver_version", "gpus", "nvlinks", "nvswitch", "nics", "fabric", "imex_channels"}
)
_GPU_KEYS = frozenset(
    {"model", "memory_mib", "uuid", "pci_bus_id", "numa_node", "pcie", "mig", "fabric"}
)


@dataclass(frozen=True)
class GpuDescription:
    """One GPU of the machine; `index` is its position in the file, i.e. its NVML index."""

    index: int
    model: str
    memory_mib: int
    uuid: str
    pci_bus_id: str  # normalised like device_plugin.nvml.types.normalise_pci_bus_id
    numa_node: int | None
    # [0] CPU socket, [1] host bridge / root port, [2:] PCIe switches, root first
    pcie: tuple[str, ...]
    # the `mig:` key (device_plugin/nvml/fake/mig_description.py); None: not given
    mig: MigLayout | None = None
    # the `fabric:` keys, machine-wide and the GPU's own (fabric_description.py)
    fabric: FabricInfo = NO_FABRIC


@dataclass(frozen=True)
class MachineDescription:
    name: str
    driver_version: str
    gpus: tuple[GpuDescription, ...]
    nvlinks: tuple[NvLinkBundle, ...]  # sorted by (gpu_a, gpu_b)
    nvswitch: tuple[NvSwitchDomain, ...]  # in file order: the position is the domain number
    # the `nics:` list in file order (device_plugin/nvml/fake/nic_description.py)
    nics: tuple[NicInfo, ...] = ()
    # IMEX channel device nodes the node has (fabric_description.py)
    imex_channels: tuple[int, ...] = ()


def default_uuid(machine_name: str, index: int) -> str:
    return "GPU-" + str(uuid_lib.uuid5(_UUID_NAMESPACE, f"{machine_name}/{index}"))


def default_pci_bus_id(index: int) -> str:
    # One bus per GPU from 0x10 upwards; past bus 0xff continue in the next PCI domain.
    domain, offset = divmod(index, 0xF0)
    return f"{domain:04x}:{0x10 + offset:02x}:00.0"


def load_machine_file(path: Path) -> MachineDescription:
    """Read and validate one machine-description file, with the config file's limits (a regular file
    only, never blocking, MAX_MACHINE_BYTES, the YAML limits of core/bounded_yaml.py)."""
    try:
        data = read_regular_file(path, limit=MAX_MACHINE_BYTES, field="machine")
        text = data.decode("utf-8")
    except ConfigError as exc:
        raise MachineDescriptionError(exc.field, exc.message) from None
    except UnicodeDecodeError as exc:
        raise MachineDescriptionError(
            "machine", f"{path} is not UTF-8 text: {exc.reason}"
        ) from None
    return parse_machine_yaml(text, source=str(path))


def parse_machine_yaml(text: str, *, source: str = "<string>") -> MachineDescription:
    try:
        data = load_yaml_text(text, source=source, field="machine", kind="YAML", quote=False)
    # syntax errors name the source; the others name the path inside, and get it
    except ConfigError as exc:
        message = exc.message if exc.field == "machine" else f"{exc.message} in {source}"
        raise MachineDescriptionError(exc.field, message) from None
    try:
        return parse_machine_description(data)
    except MachineDescriptionError as exc:
        if source == "<string>":
            raise
        raise MachineDescriptionError(exc.field, f"{exc.message} (in {source})") from exc


def parse_machine_description(data: object) -> MachineDescription:
    """Validate a decoded YAML document (a mapping) into a MachineDescription."""
    top = read.mapping(data, "machine", _TOP_KEYS, required=("name", "gpus"))
    name = read.string(top["name"], "name")
    driver = (
        read.string(top["driver_version"], "driver_version")
        if "driver_version" in top
        else DEFAULT_DRIVER_VERSION
    )
    raw_gpus = read.list_of(top["gpus"], "gpus")
    if not raw_gpus:
        raise MachineDescriptionError("gpus", "a machine has at least one GPU")
    fabric = parse_fabric_keys(top["fabric"], "fabric") if "fabric" in top else None
    gpus = tuple(_parse_gpu(raw, index, name, fabric) for index, raw in enumerate(raw_gpus))
    _check_unique(gpus)
    _check_pcie_tree(gpus)
    _check_numa_matches_host_bridge(gpus)
    nvlinks = parse_nvlinks(top.get("nvlinks"), len(gpus))
    nvswitch = parse_nvswitch(top.get("nvswitch"), len(gpus))
    check_link_totals(len(gpus), nvlinks, nvswitch)
    gpu_paths = [(f"gpus[{g.index}]", g.pcie, g.numa_node, g.pci_bus_id) for g in gpus]
    nics = parse_nics(top.get("nics"), gpu_paths)
    imex_channels = parse_imex_channels(top.get("imex_channels"))
    return MachineDescription(name, driver, gpus, nvlinks, nvswitch, nics, imex_channels)


def _parse_gpu(
    raw: object, index: int, machine_name: str, fabric: Mapping[str, Any] | None
) -> GpuDescription:
    where = f"gpus[{index}]"
    gpu = read.mapping(raw, where, _GPU_KEYS, required=("model", "memory_mib"))
    model = read.string(gpu["model"], f"{where}.model")
    memory_mib = read.integer(gpu["memory_mib"], f"{where}.memory_mib", minimum=1)
    uuid = (
        read.string(gpu["uuid"], f"{where}.uuid")
        if "uuid" in gpu
        else default_uuid(machine_name, index)
    )
    if not _UUID.match(uuid):
        raise MachineDescriptionError(
            f"{where}.uuid", f"{uuid!r} is not a GPU UUID like GPU-xxxxxxxx-xxxx-..."
        )
    if "pci_bus_id" in gpu:
        bus_id = read.string(gpu["pci_bus_id"], f"{where}.pci_bus_id")
        bus_id = normalise_pci_bus_id(bus_id) if _looks_like_bus_id(bus_id) else bus_id
        if not _PCI_BUS_ID.match(bus_id):
            raise MachineDescriptionError(
                f"{where}.pci_bus_id", f"{bus_id!r} is not a PCI address like 0000:06:00.0"
            )
        if int(bus_id.split(":")[0], 16) >= 0xFE00:
            raise MachineDescriptionError(
                f"{where}.pci_bus_id", "PCI domains >= fe00 are reserved for NVSwitches"
            )
    else:
        bus_id = default_pci_bus_id(index)
    # not given: unknown, as a platform that reports none (never a guessed 0)
    numa_node: int | None = None
    if "numa_node" in gpu:
        raw_numa = gpu["numa_node"]
        numa_node = (
            None
            if raw_numa is None
            else read.integer(raw_numa, f"{where}.numa_node", 0, _MAX_NUMA_NODE)
        )
    if "pcie" in gpu:
        path = read.list_of(gpu["pcie"], f"{where}.pcie")
        if not path:
            raise MachineDescriptionError(
                f"{where}.pcie", "needs at least the CPU socket, e.g. [cpu0]"
            )
        pcie = tuple(read.string(part, f"{where}.pcie[{i}]") for i, part in enumerate(path))
    else:
        pcie = (f"cpu{numa_node or 0}",)
    mig = parse_mig(gpu["mig"], f"{where}.mig", model) if "mig" in gpu else None
    own = parse_fabric_keys(gpu["fabric"], f"{where}.fabric") if "fabric" in gpu else None
    where_fabric = f"{where}.fabric" if own is not None else "fabric"
    fabric_info = gpu_fabric(fabric, own, where_fabric)
    return GpuDescription(
        index, model, memory_mib, uuid, bus_id, numa_node, pcie, mig=mig, fabric=fabric_info
    )


def _looks_like_bus_id(text: str) -> bool:
    return text.count(":") == 2 and all(c in "0123456789abcdefABCDEF:." for c in text)


def _check_unique(gpus: tuple[GpuDescription, ...]) -> None:
    uuids: dict[str, int] = {}
    bus_ids: dict[str, int] = {}
    for gpu in gpus:
        if gpu.uuid.lower() in uuids:
            raise MachineDescriptionError(
                f"gpus[{gpu.index}].uuid", f"same as gpus[{uuids[gpu.uuid.lower()]}]"
            )
        if gpu.pci_bus_id in bus_ids:
            raise MachineDescriptionError(
                f"gpus[{gpu.index}].pci_bus_id", f"same as gpus[{bus_ids[gpu.pci_bus_id]}]"
            )
        uuids[gpu.uuid.lower()] = gpu.index
        bus_ids[gpu.pci_bus_id] = gpu.index


def _check_pcie_tree(gpus: tuple[GpuDescription, ...]) -> None:
    """PCIe paths must form a tree: a component sits at one depth, under one parent, in every
    path."""
    placed: dict[str, tuple[int, str | None, int]] = {}  # component -> (depth, parent, first gpu)
    for gpu in gpus:
        for depth, part in enumerate(gpu.pcie):
            parent = gpu.pcie[depth - 1] if depth else None
            if part in gpu.pcie[:depth]:
                raise MachineDescriptionError(
                    f"gpus[{gpu.index}].pcie[{depth}]", f"{part!r} repeats in the path"
                )
            seen = placed.setdefault(part, (depth, parent, gpu.index))
            if seen[:2] != (depth, parent):
                raise MachineDescriptionError(
                    f"gpus[{gpu.index}].pcie[{depth}]",
                    f"{part!r} sits under {parent!r} at depth {depth} here but under {seen[1]!r} "
                    "at depth "
                    f"{seen[0]} in gpus[{seen[2]}]; PCIe paths must form a tree",
                )


def _check_numa_matches_host_bridge(gpus: tuple[GpuDescription, ...]) -> None:
    """GPUs under one host bridge are attached to one NUMA node; anything else cannot be built."""
    first: dict[str, GpuDescription] = {}
    for gpu in gpus:
        if len(gpu.pcie) < 2 or gpu.numa_node is None:
            continue
        other = first.setdefault(gpu.pcie[1], gpu)
        if other.numa_node != gpu.numa_node:
            raise MachineDescriptionError(
                f"gpus[{gpu.index}].numa_node",
                f"{gpu.numa_node}, but gpus[{other.index}] under the same host bridge "
                f"{gpu.pcie[1]!r} "
                f"is on NUMA node {other.numa_node}",
            )
