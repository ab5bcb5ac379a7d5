"""RealNvml: the NvmlBackend over nvidia-ml-py (pynvml). The only module in the project that imports
pynvml.

Every pynvml call goes through RealNvml._call, the one choke point that turns pynvml.NVMLError into
device_plugin.core.errors.NvmlError naming the call, the device and NVML's return code. NUMA nodes
do not come from NVML but from sysfs (`<sys_root>/bus/pci/devices/<bdf>/numa_node`), with the root
injectable.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml

from device_plugin.core.errors import NvmlError, NvmlUnavailableError
from device_plugin.nvml.fabric_types import FabricInfo
from device_plugin.nvml.health_types import ProbeResult
from device_plugin.nvml.imex_channels import scan_imex_channels
from device_plugin.nvml.mig_types import MigDevice, MigMode
from device_plugin.nvml.real.fabric import read_fabric_info
from device_plugin.nvml.real.health import RealEventWatch, RealHealth
from device_plugin.nvml.real.mig import read_mig_devices, read_mig_mode
from device_plugin.nvml.sysfs_nics import SysfsNics
from device_plugin.nvml.telemetry import GpuTelemetry
from device_plugin.nvml.types import (
    GpuInfo,
    NicInfo,
    NvLinkInfo,
    PcieLevel,
    SystemInfo,
    normalise_pci_bus_id,
)

log = logging.getLogger(__name__)

_MIB = 1024 * 1024
# NVML return codes are part of its C ABI; pynvml only names them.
# A link index this GPU does not have: skip it and look at the next one (links need not be
# contiguous).
_ABSENT_LINK_CODES = frozenset(
    {pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_INVALID_ARGUMENT}
)
# The driver cannot answer this query at all (old driver or GPU generation).
_UNSUPPORTED_CODES = frozenset(
    {pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND}
)


def read_numa_node(sys_root: Path, pci_bus_id: str) -> int | None:
    """NUMA node of a PCI device from sysfs; None when the file is missing or says -1 (no NUMA
    affinity)."""
    path = sys_root / "bus" / "pci" / "devices" / normalise_pci_bus_id(pci_bus_id) / "numa_node"
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NvmlError(
            "read numa_node", f"cannot read {path}: {exc.strerror or exc}", device=pci_bus_id
        ) from exc
    try:
        node = int(text)
    except ValueError as exc:
        raise NvmlError(
            "read numa_node", f"{path} holds {text!r}, not an integer", device=pci_bus_id
        ) from exc
    return None if node < 0 else node


def format_cuda_version(version: int) -> str:
    """NVML's CUDA driver version integer (1000 * major + 10 * minor, e.g. 12040) as "12.4"."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def _text(value: str | bytes) -> str:
    # Older nvidia-ml-py releases return bytes for strings, newer ones str.
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class RealNvml:
    """NvmlBackend over the NVIDIA driver. Initialises NVML on construction; close() shuts it down.

    `library` is the pynvml module itself unless a test injects a stand-in with the same functions,
    constants and NVMLError class (tests/nvml/nvml_standin.py builds one from a machine
    description).
    """

    def __init__(self, sys_root: Path = Path("/sys"), *, library: Any = None) -> None:
        self._sys_root = sys_root
        self._sysfs_nics = SysfsNics(sys_root)
        self._nvml: Any = pynvml if library is None else library
        self._lock = threading.Lock()
        self._closed = False
        self._health = RealHealth(self._call)  # event sets and probes, through the same choke point
        try:
            self._nvml.nvmlInit()
        except self._nvml.NVMLError as exc:
            raise NvmlUnavailableError(
                "nvmlInit",
                f"{exc} (NVML code {exc.value}). Is the NVIDIA driver loaded and libnvidia-ml.so.1 "
                "visible (in a "
                "container: run it with the NVIDIA container runtime)? Without a GPU, simulate one "
                "with "
                "--machine NAME or --machine FILE.",
                code=exc.value,
            ) from exc
        except OSError as exc:  # a broken library that the loader finds but cannot load
            raise NvmlUnavailableError("nvmlInit", f"cannot load the NVML library: {exc}") from exc

    def _call(self, function: str, *args: Any, device: str | None = None) -> Any:
        """The choke point: call pynvml.<function>(*args), translating its errors into NvmlError."""
        if self._closed:
            raise NvmlError(
                function,
                "the backend is closed",
                device=device,
                code=pynvml.NVML_ERROR_UNINITIALIZED,
            )
        fn: Callable[..., Any] | None = getattr(self._nvml, function, None)
        if fn is None:  # an nvidia-ml-py release older than the function
            raise NvmlError(
                function,
                "not in this nvidia-ml-py",
                device=device,
                code=pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
            )
        try:
            return fn(*args)
        except self._nvml.NVMLError as exc:
            raise NvmlError(function, str(exc), device=device, code=exc.value) from exc

    def _handle(self, index: int) -> Any:
        return self._call("nvmlDeviceGetHandleByIndex", index, device=f"GPU {index}")

    def system_info(self) -> SystemInfo:
        driver = _text(self._call("nvmlSystemGetDriverVersion"))
        try:
            cuda = format_cuda_version(int(self._call("nvmlSystemGetCudaDriverVersion")))
        except NvmlError as exc:
            if exc.code not in _UNSUPPORTED_CODES:
                raise
            cuda = ""  # the protocol's "cannot tell"
        return SystemInfo(driver_version=driver, cuda_driver_version=cuda)

    def gpus(self) -> tuple[GpuInfo, ...]:
        count = int(self._call("nvmlDeviceGetCount"))
        return tuple(self._gpu(index) for index in range(count))

    def _gpu(self, index: int) -> GpuInfo:
        handle = self._handle(index)
        where = f"GPU {index}"
        pci = self._call("nvmlDeviceGetPciInfo", handle, device=where)
        bus_id = normalise_pci_bus_id(_text(pci.busId))
        memory = self._call("nvmlDeviceGetMemoryInfo", handle, device=where)
        return GpuInfo(
            index=index,
            uuid=_text(self._call("nvmlDeviceGetUUID", handle, device=where)),
            name=_text(self._call("nvmlDeviceGetName", handle, device=where)),
            memory_mib=int(memory.total) // _MIB,
            pci_bus_id=bus_id,
            numa_node=read_numa_node(self._sys_root, bus_id),
        )

    def nvlinks(self, index: int) -> tuple[NvLinkInfo, ...]:
        handle = self._handle(index)
        # fetched only if the driver cannot name remote device types
        gpu_bus_ids: set[str] | None = None
        links: list[NvLinkInfo] = []
        for link in range(self._nvml.NVML_NVLINK_MAX_LINKS):
            where = f"GPU {index} link {link}"
            try:
                active = bool(self._call("nvmlDeviceGetNvLinkState", handle, link, device=where))
            except NvmlError as exc:
                if exc.code in _ABSENT_LINK_CODES:
                    continue
                raise
            try:
                remote = normalise_pci_bus_id(
                    _text(self._remote_pci_info(handle, link, where).busId)
                )
            except NvmlError:
                if active:
                    raise
                # a down link may have no remote to name
                links.append(NvLinkInfo(link, False, "", False))
                continue
            try:
                kind = self._call("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link, device=where)
                is_switch = kind == self._nvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
            except NvmlError as exc:
                if exc.code not in _UNSUPPORTED_CODES:
                    raise
                # Drivers before R450 cannot say; a remote that is none of our GPUs is then an
                # NVSwitch.
                if gpu_bus_ids is None:
                    gpu_bus_ids = {gpu.pci_bus_id for gpu in self.gpus()}
                is_switch = remote not in gpu_bus_ids
            links.append(NvLinkInfo(link, active, remote, is_switch))
        return tuple(links)

    def _remote_pci_info(self, handle: Any, link: int, where: str) -> Any:
        function = (
            "nvmlDeviceGetNvLinkRemotePciInfo_v2"
            if hasattr(self._nvml, "nvmlDeviceGetNvLinkRemotePciInfo_v2")
            else "nvmlDeviceGetNvLinkRemotePciInfo"
        )
        return self._call(function, handle, link, device=where)

    def device_minor(self, index: int) -> int:
        return int(
            self._call("nvmlDeviceGetMinorNumber", self._handle(index), device=f"GPU {index}")
        )

    def pcie_level(self, index_a: int, index_b: int) -> PcieLevel:
        call = "nvmlDeviceGetTopologyCommonAncestor"
        if index_a == index_b:
            raise NvmlError(
                call,
                "a GPU has no common ancestor with itself",
                device=f"GPU {index_a}",
                code=pynvml.NVML_ERROR_INVALID_ARGUMENT,
            )
        try:
            level = self._call(
                call,
                self._handle(index_a),
                self._handle(index_b),
                device=f"GPUs {index_a},{index_b}",
            )
        except NvmlError as exc:
            if exc.code not in _UNSUPPORTED_CODES:
                raise
            # Some hypervisors hide the PCIe tree of passed-through GPUs. Assume the farthest level:
            # the allocator then never prefers this pair for PCIe closeness it cannot prove.
            log.warning(
                "GPUs %d,%d: NVML cannot tell their PCIe common ancestor (%s); assuming SYS",
                index_a,
                index_b,
                exc,
            )
            return PcieLevel.SYSTEM
        try:
            return PcieLevel(int(level))
        except ValueError as exc:
            raise NvmlError(
                call, f"unknown topology level {level}", device=f"GPUs {index_a},{index_b}"
            ) from exc

    def fabric_info(self, index: int) -> FabricInfo:
        """GPU `index`'s NVLink fabric registration (device_plugin/nvml/real/fabric.py)."""
        return read_fabric_info(self._call, self._nvml, self._handle(index), f"GPU {index}")

    def imex_channels(self, dev_root: Path) -> frozenset[int]:
        """ImexChannelSource: the channel device nodes under `dev_root`
        (device_plugin/nvml/imex_channels.py)."""
        return scan_imex_channels(dev_root)

    def nics(self) -> tuple[NicInfo, ...]:
        """NicSource: the RDMA NICs sysfs lists (sysfs_nics.py); NVML knows nothing of NICs."""
        return self._sysfs_nics.nics()

    def pcie_path(self, pci_bus_id: str) -> tuple[str, ...] | None:
        """NicSource: a PCI device's root-first PCIe path from sysfs."""
        return self._sysfs_nics.pcie_path(pci_bus_id)

    def telemetry(self, index: int) -> GpuTelemetry:
        """Live readings for the /metrics GPU gauges; a reading this GPU or driver does not support
        is None."""
        handle = self._handle(index)
        where = f"GPU {index}"
        memory = self._optional("nvmlDeviceGetMemoryInfo", handle, where)
        rates = self._optional("nvmlDeviceGetUtilizationRates", handle, where)
        temperature = self._optional(
            "nvmlDeviceGetTemperature", handle, where, pynvml.NVML_TEMPERATURE_GPU
        )
        power_mw = self._optional("nvmlDeviceGetPowerUsage", handle, where)
        return GpuTelemetry(
            index=index,
            memory_total_mib=None if memory is None else int(memory.total) // _MIB,
            memory_used_mib=None if memory is None else int(memory.used) // _MIB,
            utilisation_percent=None if rates is None else float(rates.gpu),
            temperature_c=None if temperature is None else float(temperature),
            power_w=None if power_mw is None else int(power_mw) / 1000.0,  # NVML reports milliwatts
        )

    def _optional(self, function: str, handle: Any, where: str, *args: Any) -> Any:
        """_call, but None when the GPU or driver cannot answer this query (NOT_SUPPORTED, too
        old)."""
        try:
            return self._call(function, handle, *args, device=where)
        except NvmlError as exc:
            if exc.code in _UNSUPPORTED_CODES:
                return None
            raise

    def open_event_watch(self, indices: tuple[int, ...]) -> RealEventWatch:
        """HealthSource: an NVML event set over GPUs `indices`
        (device_plugin/nvml/real/health.py)."""
        return self._health.open_event_watch(indices)

    def probe(self, index: int) -> ProbeResult:
        """HealthSource: whether GPU `index` still answers and needs no repair (real_health.py)."""
        return self._health.probe(index)

    def mig_mode(self, index: int) -> MigMode | None:
        """MIG mode of GPU `index`; None when it cannot do MIG (device_plugin/nvml/real/mig.py)."""
        return read_mig_mode(self._call, self._handle(index), f"GPU {index}")

    def mig_devices(self, index: int) -> tuple[MigDevice, ...]:
        """MIG devices of GPU `index`, read only (device_plugin/nvml/real/mig.py)."""
        return read_mig_devices(self._call, self._handle(index), self._gpu(index))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError as exc:
            raise NvmlError("nvmlShutdown", str(exc), code=exc.value) from exc
