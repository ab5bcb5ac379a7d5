"""What an NVML mock profile declares, read from its YAML: the independent side the mock tests compare with.

A profile says per GPU its UUID, PCI bus id and minor number, and for all GPUs the model, memory, live
readings, NVLink (links per GPU, NVSwitches), fabric and which root complex (NUMA node) holds each bus id.
The backend under test reads the same facts through NVML and sysfs; the tests hold one against the other.
Boundary: reading the file, nothing else; bus ids come back in the project's form (normalise_pci_bus_id).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from device_plugin.nvml.types import normalise_pci_bus_id

MIB = 1024 * 1024


@dataclass(frozen=True)
class DeclaredGpu:
    index: int
    uuid: str
    pci_bus_id: str
    minor: int


@dataclass(frozen=True)
class Profile:
    name: str
    driver_version: str
    cuda_version: str
    model: str
    memory_mib: int
    memory_used_mib: int
    temperature_c: float
    power_w: float
    utilisation_percent: float
    gpus: tuple[DeclaredGpu, ...]
    links_per_gpu: int  # 0: no NVLink
    nvswitches: int
    fabric: dict[str, Any] | None  # the profile's fabric block; None: the GPUs have no NVLink fabric
    root_complex: dict[str, str]  # bus id -> root bus name (pci0000:80)
    numa_node: dict[str, int]  # bus id -> NUMA node of its root complex

    def gpu_on(self, pci_bus_id: str) -> DeclaredGpu:
        return next(gpu for gpu in self.gpus if gpu.pci_bus_id == pci_bus_id)

    def same_root_complex(self, a: int, b: int) -> bool:
        return self.root_complex[self.gpus[a].pci_bus_id] == self.root_complex[self.gpus[b].pci_bus_id]


def load_profile(path: Path) -> Profile:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    defaults = doc["device_defaults"]
    nvlink = doc.get("nvlink") or {}
    gpus = tuple(
        DeclaredGpu(
            index=int(device["index"]),
            uuid=str(device["uuid"]),
            pci_bus_id=normalise_pci_bus_id(str(device["pci"]["bus_id"])),
            minor=int(device["minor_number"]),
        )
        for device in sorted(doc["devices"], key=lambda device: int(device["index"]))
    )
    root_complex, numa = {}, {}
    for complex_ in (doc.get("pcie_topology") or {}).get("root_complexes", []):
        for bus_id in complex_["devices"]:
            root_complex[normalise_pci_bus_id(bus_id)] = str(complex_["id"])
            numa[normalise_pci_bus_id(bus_id)] = int(complex_["numa_node"])
    return Profile(
        name=path.stem.removeprefix("mock-nvml-config-"),
        driver_version=str(doc["system"]["driver_version"]),
        cuda_version=str(doc["system"]["cuda_version"]),
        model=str(defaults["name"]),
        memory_mib=int(defaults["memory"]["total_bytes"]) // MIB,
        memory_used_mib=int(defaults["memory"].get("used_bytes", 0)) // MIB,
        temperature_c=float(defaults["thermal"]["temperature_gpu_c"]),
        power_w=int(defaults["power"]["current_draw_mw"]) / 1000.0,
        utilisation_percent=float(defaults["utilization"]["gpu"]),
        gpus=gpus,
        links_per_gpu=int(nvlink.get("links_per_gpu", 0)),
        nvswitches=len(nvlink.get("switches") or ()),
        fabric=defaults.get("fabric"),
        root_complex=root_complex,
        numa_node=numa,
    )
