"""FakeNvml: a stateful, thread-safe model of one machine, answering the NvmlBackend protocol.

It is built from a validated MachineDescription and answers what NVML and sysfs would report on that
node: GPUs, NVLinks (direct bundles and NVSwitch fabrics) and PCIe common ancestors. Per-GPU state
is mutable and guarded by one lock so that later features (MIG layouts, injected faults) can change
it while a server thread reads it; today nothing mutates it after construction except close().
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from device_plugin.core.ascii_digits import is_ascii_digits
from device_plugin.core.errors import NvmlError
from device_plugin.nvml.fabric_types import FabricInfo
from device_plugin.nvml.fake.catalog import load_machine_description
from device_plugin.nvml.fake.description import GpuDescription, MachineDescription
from device_plugin.nvml.fake.faults import FakeEventWatch, FakeFaults
from device_plugin.nvml.fake.link_description import nvswitch_bus_id
from device_plugin.nvml.fake.mig import FakeMigMixin
from device_plugin.nvml.health_types import ProbeResult
from device_plugin.nvml.pcie_paths import pcie_level_of_paths
from device_plugin.nvml.recovery_action import supported_by_driver
from device_plugin.nvml.telemetry import GpuTelemetry
from device_plugin.nvml.types import (
    GpuInfo,
    NicInfo,
    NvLinkInfo,
    PcieLevel,
    SystemInfo,
    nic_order_key,
    normalise_pci_bus_id,
)

# NVML return codes the fake reports, so callers see the same `code` as with the real library.
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
# What telemetry() reports: a plausible idle data-centre GPU (deterministic, so tests can compare).
IDLE_TEMPERATURE_C = 35.0
IDLE_POWER_W = 60.0

# Driver branch -> the CUDA version its driver API reports (nvidia-smi's "CUDA Version").
_CUDA_BY_DRIVER_BRANCH = {
    470: "11.4",
    510: "11.6",
    515: "11.7",
    520: "11.8",
    525: "12.0",
    530: "12.1",
    535: "12.2",
    545: "12.3",
    550: "12.4",
    555: "12.5",
    560: "12.6",
    565: "12.7",
    570: "12.8",
    575: "12.9",
    580: "13.0",
}


def cuda_version_for_driver(driver_version: str) -> str:
    """The CUDA driver version a driver branch reports; "" for a branch this table does not know."""
    head = driver_version.split(".", 1)[0]
    return _CUDA_BY_DRIVER_BRANCH.get(int(head), "") if is_ascii_digits(head) else ""


@dataclass
class _GpuState:
    """Mutable per-GPU state; always read and written under FakeNvml._lock."""

    description: GpuDescription
    info: GpuInfo
    links: tuple[NvLinkInfo, ...]
    # Later features add typed fields here (a MIG layout, injected faults) and methods on FakeNvml
    # that change them under the lock.


class FakeNvml(FakeMigMixin):
    """NvmlBackend over a machine description. Safe to share between threads."""

    def __init__(self, description: MachineDescription) -> None:
        self._description = description
        self._lock = threading.RLock()
        self._closed = False
        links = _links_by_gpu(description)
        self._gpus = [
            _GpuState(
                description=gpu,
                info=GpuInfo(
                    index=gpu.index,
                    uuid=gpu.uuid,
                    name=gpu.model,
                    memory_mib=gpu.memory_mib,
                    pci_bus_id=gpu.pci_bus_id,
                    numa_node=gpu.numa_node,
                ),
                links=links[gpu.index],
            )
            for gpu in description.gpus
        ]
        self._visible = len(self._gpus)  # the first N described GPUs are on the bus (set_gpu_count)
        self._init_mig()  # MIG layouts from the description (fake_mig.py)
        self._system = SystemInfo(
            driver_version=description.driver_version,
            cuda_driver_version=cuda_version_for_driver(description.driver_version),
        )
        # Test hooks, not NvmlBackend: faults injected by tests, the demo and --fake-events
        # (fake_events.py); open_event_watch and probe below read them (the health side).
        # the recovery-action field (565+)
        supported = supported_by_driver(description.driver_version)
        self.test_hooks = FakeFaults(len(self._gpus), recovery_action_supported=supported)

    @classmethod
    def from_machine(cls, name_or_path: str | Path) -> FakeNvml:
        """A fake for a shipped machine name or a machine-description file."""
        return cls(load_machine_description(str(name_or_path)))

    @property
    def description(self) -> MachineDescription:
        return self._description

    def system_info(self) -> SystemInfo:
        with self._lock:
            self._check_open("nvmlSystemGetDriverVersion")
            return self._system

    def gpus(self) -> tuple[GpuInfo, ...]:
        with self._lock:
            self._check_open("nvmlDeviceGetCount")
            return tuple(state.info for state in self._gpus[: self._visible])

    def set_gpu_count(self, count: int) -> None:
        """From now on the driver enumerates only the first `count` described GPUs: a GPU that a
        later rescan finds (count raised) or that has gone (count lowered). The others answer like
        absent GPUs."""
        if not 0 <= count <= len(self._gpus):
            raise ValueError(
                f"GPU count {count} is outside 0..{len(self._gpus)} (the described GPUs)"
            )
        with self._lock:
            self._visible = count

    def nvlinks(self, index: int) -> tuple[NvLinkInfo, ...]:
        with self._lock:
            return self._state("nvmlDeviceGetNvLinkState", index).links

    def device_minor(self, index: int) -> int:
        """The simulated driver numbers its device nodes like NVML (true on most real machines
        too)."""
        with self._lock:
            self._state("nvmlDeviceGetMinorNumber", index)
        return index

    def pcie_level(self, index_a: int, index_b: int) -> PcieLevel:
        call = "nvmlDeviceGetTopologyCommonAncestor"
        with self._lock:
            a = self._state(call, index_a).description
            b = self._state(call, index_b).description
        if index_a == index_b:
            raise NvmlError(
                call,
                "a GPU has no common ancestor with itself",
                device=f"GPU {index_a}",
                code=NVML_ERROR_INVALID_ARGUMENT,
            )
        return pcie_level_of_paths(a.pcie, b.pcie)

    def fabric_info(self, index: int) -> FabricInfo:
        """The GPU's fabric registration as the description states it (not_supported when it states
        none)."""
        with self._lock:
            return self._state("nvmlDeviceGetGpuFabricInfoV", index).description.fabric

    def imex_channels(self, dev_root: Path) -> frozenset[int]:
        """ImexChannelSource: the description's `imex_channels` (the simulated node's /dev;
        `dev_root` unused)."""
        with self._lock:
            self._check_open("stat /dev/nvidia-caps-imex-channels")
        return frozenset(self._description.imex_channels)

    def nics(self) -> tuple[NicInfo, ...]:
        """NicSource: the description's NICs, ordered by name (as sysfs lists them)."""
        with self._lock:
            self._check_open("read /sys/class/infiniband")
        return tuple(sorted(self._description.nics, key=nic_order_key))

    def pcie_path(self, pci_bus_id: str) -> tuple[str, ...] | None:
        """NicSource: the described PCIe path of a GPU or NIC by bus id; None for any other
        device."""
        bus_id = normalise_pci_bus_id(pci_bus_id)
        for gpu in self._description.gpus:
            if gpu.pci_bus_id == bus_id:
                return gpu.pcie
        for nic in self._description.nics:
            if nic.pci_bus_id == bus_id:
                return nic.pcie_path
        return None

    def telemetry(self, index: int) -> GpuTelemetry:
        """Readings of an idle GPU, the same every time: all memory free, 0 % busy, IDLE_*
        temperature/power."""
        with self._lock:
            info = self._state("nvmlDeviceGetMemoryInfo", index).info
        return GpuTelemetry(
            index=index,
            memory_total_mib=info.memory_mib,
            memory_used_mib=0,
            utilisation_percent=0.0,
            temperature_c=IDLE_TEMPERATURE_C,
            power_w=IDLE_POWER_W,
        )

    def open_event_watch(self, indices: tuple[int, ...]) -> FakeEventWatch:
        """HealthSource: an event watch over the injected faults (see fake_faults.py)."""
        with self._lock:
            self._check_open("nvmlEventSetCreate")
        return self.test_hooks.open_watch(indices)

    def probe(self, index: int) -> ProbeResult:
        """HealthSource: fails while an injected fault is sticky, or once the backend is closed."""
        with self._lock:
            if self._closed:
                return ProbeResult(index, False, "NVML is shut down (the backend is closed)")
        return self.test_hooks.probe(index)

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def _check_open(self, call: str) -> None:
        if self._closed:
            raise NvmlError(call, "the backend is closed", code=NVML_ERROR_UNINITIALIZED)

    def _state(self, call: str, index: int) -> _GpuState:
        self._check_open(call)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < self._visible:
            raise NvmlError(
                call,
                f"no GPU with index {index!r}; this machine has {self._visible}",
                device=f"GPU {index!r}",
                code=NVML_ERROR_INVALID_ARGUMENT,
            )
        return self._gpus[index]


def _links_by_gpu(description: MachineDescription) -> list[tuple[NvLinkInfo, ...]]:
    """Number every GPU's links: direct bundles by peer index first, then NVSwitch links.

    A GPU's link k into NVSwitch domain d lands on synthetic switch k mod S of that domain, with S
    the smaller of links_per_gpu and 6 (a DGX A100 has 6 NVSwitches). GPUs of one domain therefore
    reach the same switch bus ids, and two domains never share one.
    """
    remotes: list[list[tuple[str, bool]]] = [[] for _ in description.gpus]
    bus = [gpu.pci_bus_id for gpu in description.gpus]
    peers: list[list[tuple[int, int]]] = [[] for _ in description.gpus]
    for bundle in description.nvlinks:
        peers[bundle.gpu_a].append((bundle.gpu_b, bundle.links))
        peers[bundle.gpu_b].append((bundle.gpu_a, bundle.links))
    for gpu, gpu_peers in enumerate(peers):
        for peer, count in sorted(gpu_peers):
            remotes[gpu].extend([(bus[peer], False)] * count)
    for d, domain in enumerate(description.nvswitch):
        switches = min(domain.links_per_gpu, 6)
        for gpu in domain.gpus:
            remotes[gpu].extend(
                (nvswitch_bus_id(d, k % switches), True) for k in range(domain.links_per_gpu)
            )
    return [
        tuple(
            NvLinkInfo(link=k, active=True, remote_pci_bus_id=remote, remote_is_nvswitch=is_switch)
            for k, (remote, is_switch) in enumerate(gpu_remotes)
        )
        for gpu_remotes in remotes
    ]
