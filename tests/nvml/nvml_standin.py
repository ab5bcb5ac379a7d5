"""A pynvml-shaped stand-in library built from a FakeNvml, so RealNvml's translation runs without a GPU.

It answers in NVML's own forms (bytes strings, "00000000:06:00.0" bus ids in upper case, memory in bytes,
CUDA version 12040, NOT_SUPPORTED for link indices a GPU lacks), so a RealNvml over it must report exactly
what the FakeNvml reports. Test harness only; the NVML return codes are those of NVML's C API.
"""

from __future__ import annotations

import ctypes
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from device_plugin.nvml.fabric_types import FabricState
from device_plugin.nvml.fake.machine import FakeNvml

NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_NVLINK_MAX_LINKS = 36
NVML_NVLINK_DEVICE_TYPE_GPU = 0
NVML_NVLINK_DEVICE_TYPE_SWITCH = 2


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return f"stand-in NVML error {self.value}"


class GpuFabricInfoV(ctypes.Structure):
    """nvmlGpuFabricInfo_v2_t's layout, as nvidia-ml-py declares c_nvmlGpuFabricInfoV_t."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_uint8 * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint),
        ("healthMask", ctypes.c_uint32),
    ]


class GpuFabricInfo(ctypes.Structure):
    """nvmlGpuFabricInfo_t's layout (the deprecated, unversioned call)."""

    _fields_ = [
        ("clusterUuid", ctypes.c_uint8 * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint),
    ]


def nvml_form(bus_id: str) -> bytes:
    domain, rest = bus_id.split(":", 1)
    return f"{int(domain, 16):08X}:{rest.upper()}".encode()


class NvmlStandin:
    """Module-like object: attribute names match pynvml's."""

    NVMLError = NVMLError
    NVML_NVLINK_MAX_LINKS = NVML_NVLINK_MAX_LINKS
    NVML_NVLINK_DEVICE_TYPE_SWITCH = NVML_NVLINK_DEVICE_TYPE_SWITCH

    def __init__(
        self,
        fake: FakeNvml,
        *,
        init_error: int | None = None,
        knows_remote_type: bool = True,
        fabric_calls: tuple[str, ...] = ("V", "v1"),
        fabric_error: int | None = None,
    ) -> None:
        self._fake = fake
        self._gpus = fake.gpus()
        self._init_error = init_error
        if knows_remote_type:
            self.nvmlDeviceGetNvLinkRemoteDeviceType = self._remote_type
        # Which fabric-info calls this "nvidia-ml-py" has (older releases lack V, oldest both).
        if "V" in fabric_calls:
            self.c_nvmlGpuFabricInfoV_t = GpuFabricInfoV
            self.nvmlDeviceGetGpuFabricInfoV = self._fabric_info
        if "v1" in fabric_calls:
            self.c_nvmlGpuFabricInfo_t = GpuFabricInfo
            self.nvmlDeviceGetGpuFabricInfo = self._fabric_info
        self._fabric_error = fabric_error  # every fabric call fails with this NVML code
        self.fabric_calls_made: list[str] = []
        self.shutdowns = 0

    def write_sysfs(self, sys_root: Path) -> None:
        """The numa_node files a kernel would show for these GPUs (-1 where the description says unknown)."""
        for gpu in self._gpus:
            device = sys_root / "bus" / "pci" / "devices" / gpu.pci_bus_id
            device.mkdir(parents=True)
            (device / "numa_node").write_text(f"{-1 if gpu.numa_node is None else gpu.numa_node}\n")

    def nvmlInit(self) -> None:
        if self._init_error is not None:
            raise NVMLError(self._init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return self._fake.system_info().driver_version.encode()

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        major, minor = self._fake.system_info().cuda_driver_version.split(".")
        return int(major) * 1000 + int(minor) * 10

    def nvmlDeviceGetCount(self) -> int:
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < len(self._gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return index

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(busId=nvml_form(self._gpus[handle].pci_bus_id))

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(total=self._gpus[handle].memory_mib * 1024 * 1024 + 4096)

    def nvmlDeviceGetMinorNumber(self, handle: int) -> int:
        # Real drivers may number /dev/nvidia<minor> apart from NVML's order; reversed makes that visible.
        return len(self._gpus) - 1 - handle

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return self._gpus[handle].uuid.encode()

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self._gpus[handle].name

    def _link(self, handle: int, link: int) -> object:
        links = self._fake.nvlinks(handle)
        if link >= len(links):
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return links[link]

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        return int(self._link(handle, link).active)  # type: ignore[attr-defined]

    def nvmlDeviceGetNvLinkRemotePciInfo_v2(self, handle: int, link: int) -> SimpleNamespace:
        return SimpleNamespace(busId=nvml_form(self._link(handle, link).remote_pci_bus_id))  # type: ignore[attr-defined]

    def _remote_type(self, handle: int, link: int) -> int:
        remote_is_switch = self._link(handle, link).remote_is_nvswitch  # type: ignore[attr-defined]
        return NVML_NVLINK_DEVICE_TYPE_SWITCH if remote_is_switch else NVML_NVLINK_DEVICE_TYPE_GPU

    def nvmlDeviceGetTopologyCommonAncestor(self, handle_a: int, handle_b: int) -> int:
        return int(self._fake.pcie_level(handle_a, handle_b))

    def _fabric_info(self, handle: int, pointer: Any) -> int:
        """Fills the structure behind `pointer` (ctypes.byref) like NVML; NOT_SUPPORTED without a fabric."""
        structure = pointer._obj
        self.fabric_calls_made.append(type(structure).__name__)
        if self._fabric_error is not None:
            raise NVMLError(self._fabric_error)
        fabric = self._fake.fabric_info(handle)
        if fabric.state is FabricState.NOT_SUPPORTED:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        structure.clusterUuid[:] = list(uuid.UUID(fabric.cluster_uuid).bytes)
        structure.status = fabric.status
        structure.cliqueId = fabric.clique_id
        structure.state = int(fabric.state)
        return 0
