"""The NvmlBackend protocol: the narrow contract between the plugin and the hardware.

Both the real backend (pynvml) and the fake one (a machine-description file) implement it, and the
contract tests in tests/nvml run against both. Methods raise device_plugin.core.errors.NvmlError
with context on failure; they never return a silent default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from device_plugin.nvml.fabric_types import FabricInfo
from device_plugin.nvml.mig_types import MigDevice, MigMode
from device_plugin.nvml.types import GpuInfo, NicInfo, NvLinkInfo, PcieLevel, SystemInfo


class NvmlBackend(Protocol):
    def system_info(self) -> SystemInfo:
        """Driver and CUDA driver versions."""
        ...

    def gpus(self) -> tuple[GpuInfo, ...]:
        """Every physical GPU, ordered by NVML index."""
        ...

    def nvlinks(self, index: int) -> tuple[NvLinkInfo, ...]:
        """Every NVLink of GPU `index` (inactive ones included), ordered by link number."""
        ...

    def device_minor(self, index: int) -> int:
        """The driver's minor number of GPU `index`: its device node is /dev/nvidia<minor>."""
        ...

    def pcie_level(self, index_a: int, index_b: int) -> PcieLevel:
        """Closest common PCIe ancestor of two distinct GPUs."""
        ...

    def mig_mode(self, index: int) -> MigMode | None:
        """MIG mode (current, pending) of GPU `index`; None when the GPU cannot do MIG."""
        ...

    def mig_devices(self, index: int) -> tuple[MigDevice, ...]:
        """MIG devices of GPU `index` (mig_types.mig_device_sort_key order); empty unless MIG is
        enabled now."""
        ...

    def fabric_info(self, index: int) -> FabricInfo:
        """GPU `index`'s NVLink fabric registration (cluster UUID, clique, state, status); state
        NOT_SUPPORTED where the GPU or driver has no such fabric
        (device_plugin/nvml/fabric_types.py)."""
        ...

    def close(self) -> None:
        """Release the backend (nvmlShutdown for the real one). Idempotent."""
        ...


@runtime_checkable
class NicSource(Protocol):
    """RDMA NICs and PCIe paths: not NVML, but what GPU-NIC distances are computed from.

    FakeNvml answers from its machine description, RealNvml from sysfs
    (device_plugin/nvml/sysfs_nics.py). A backend without these methods simply has no NICs.
    """

    def nics(self) -> tuple[NicInfo, ...]:
        """Every RDMA device of the node, ordered by name; empty when there is none."""
        ...

    def pcie_path(self, pci_bus_id: str) -> tuple[str, ...] | None:
        """The root-first PCIe path (device_plugin/nvml/pcie_paths.py) of a PCI device; None when
        unknown."""
        ...


@runtime_checkable
class ImexChannelSource(Protocol):
    """IMEX channel device nodes (/dev/nvidia-caps-imex-channels/channel<N>): not NVML, but the
    driver's.

    FakeNvml answers from its machine description (`imex_channels:`), RealNvml from the device nodes
    under `dev_root` (device_plugin/nvml/imex_channels.py). A backend without the method has none.
    """

    def imex_channels(self, dev_root: Path) -> frozenset[int]:
        """The channel numbers whose character device exists; empty when there is none."""
        ...
