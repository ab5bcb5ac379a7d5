"""What Allocate hands a container: NVIDIA's device-list strategies, ID strategies and device specs.

Boundary: pure functions of (settings, device nodes, devices). The only I/O is scan_device_nodes(),
which the composition root calls once with an injected /dev root; builders never touch the disk.

Conventions follow NVIDIA's device plugin and container toolkit so that existing runtimes work:
- envvar          NVIDIA_VISIBLE_DEVICES=<id,id,...>                       (the toolkit reads the
  env)
- volume-mounts   NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices plus one mount per
  device,
                  host /dev/null -> /var/run/nvidia-container-devices/<id> (the toolkit lists that
                  dir; the env cannot be forged by an unprivileged pod spec this way)
- cdi-annotations annotation <prefix>gpu-device-plugin_<digest> = "<kind>=<id>,..."
- cdi-cri         cdi_devices = ["<kind>=<id>", ...] (kubelet's DevicePluginCDIDevices field)
IMEX channels (imex.channelIDs) join every answer in each strategy's form (allocation/imex.py).
Strategies combine additively. volume-mounts wins the NVIDIA_VISIBLE_DEVICES value over envvar (as
NVIDIA's plugin does). When every selected strategy is CDI, no env and no device specs are returned:
the CDI spec carries the device nodes.

IDs: `uuid` names the GPU/MIG UUID; `index` names a whole GPU by its NVML index "i" and a MIG device
"i:j" (parent index : MIG device index), NVIDIA's form. Replicas ("<uuid>::<n>") name their GPU
once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType

from device_plugin.allocation.imex import ImexChannels
from device_plugin.allocation.protocols import VISIBLE_DEVICES_ENV, device_sort_key
from device_plugin.config.model import Flags
from device_plugin.core.devices import ContainerAllocation, Device, DeviceSpec, Mount
from device_plugin.core.errors import ConfigError
from device_plugin.core.ids import parse_device_id
from device_plugin.core.names import CDI_KIND

VOLUME_MOUNTS_ROOT = "/var/run/nvidia-container-devices"
DEFAULT_CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"
# gpuDevicePlugin.nicHints: close RDMA NICs of the allocated GPUs
NIC_HINTS_ENV = "GPU_DEVICE_PLUGIN_NICS"
CDI_ANNOTATION_NAME = "gpu-device-plugin"
# Node-wide control devices, in the order NVIDIA passes them; each only if it exists.
CONTROL_DEVICE_NODES = (
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
)
MIG_UUID_PREFIX = "MIG-"

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_PREFIX_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*/\Z")
_KIND_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*/[A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?\Z")
_GPU_NODE_RE = re.compile(r"^nvidia(0|[1-9][0-9]*)\Z")


class DeviceListStrategy(StrEnum):
    ENVVAR = "envvar"
    VOLUME_MOUNTS = "volume-mounts"
    CDI_ANNOTATIONS = "cdi-annotations"
    CDI_CRI = "cdi-cri"

    @property
    def is_cdi(self) -> bool:
        return self in (DeviceListStrategy.CDI_ANNOTATIONS, DeviceListStrategy.CDI_CRI)


class DeviceIdStrategy(StrEnum):
    UUID = "uuid"
    INDEX = "index"


def parse_device_list_strategies(value: str | Sequence[str]) -> tuple[DeviceListStrategy, ...]:
    """NVIDIA accepts one name, a comma-separated string (the env var) or a list (the config
    file)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [str(item).strip() for item in items if str(item).strip()]
    if not names:
        raise ConfigError("flags.plugin.deviceListStrategy", "must name at least one strategy")
    known = {s.value: s for s in DeviceListStrategy}
    unknown = sorted(n for n in names if n not in known)
    if unknown:
        raise ConfigError(
            "flags.plugin.deviceListStrategy",
            f"unknown strategy {', '.join(unknown)}; expected one of {sorted(known)}",
        )
    return _canonical_strategies(known[n] for n in names)


def parse_device_id_strategy(value: str) -> DeviceIdStrategy:
    try:
        return DeviceIdStrategy(value.strip())
    except ValueError:
        raise ConfigError(
            "flags.plugin.deviceIDStrategy", f"unknown strategy {value!r}; expected uuid or index"
        ) from None


def _canonical_strategies(
    strategies: Iterable[DeviceListStrategy],
) -> tuple[DeviceListStrategy, ...]:
    # Enum order, duplicates dropped: equal settings compare equal whatever order the user wrote.
    chosen = set(strategies)
    return tuple(s for s in DeviceListStrategy if s in chosen)


@dataclass(frozen=True)
class ResponseSettings:
    """How Allocate names devices. Field names match NVIDIA's config keys (flags.plugin.*)."""

    device_list_strategies: tuple[DeviceListStrategy, ...] = (DeviceListStrategy.ENVVAR,)
    device_id_strategy: DeviceIdStrategy = DeviceIdStrategy.UUID
    # CPUManager compatibility: lets the kubelet put the nodes in the device cgroup itself.
    pass_device_specs: bool = False
    # Host prefix of DeviceSpec.host_path (NVIDIA's nvidiaDevRoot, e.g. /run/nvidia/driver).
    host_dev_root: str = "/"
    cdi_annotation_prefix: str = DEFAULT_CDI_ANNOTATION_PREFIX
    cdi_kind: str = CDI_KIND  # "<vendor>/<class>" of the CDI spec's devices

    def __post_init__(self) -> None:
        if not self.device_list_strategies:
            raise ConfigError("flags.plugin.deviceListStrategy", "must name at least one strategy")
        object.__setattr__(
            self, "device_list_strategies", _canonical_strategies(self.device_list_strategies)
        )
        if not self.host_dev_root.startswith("/"):
            raise ConfigError(
                "flags.nvidiaDevRoot", f"must be an absolute path, got {self.host_dev_root!r}"
            )
        if not _PREFIX_RE.match(self.cdi_annotation_prefix):
            raise ConfigError(
                "flags.plugin.cdiAnnotationPrefix",
                f"must be a DNS subdomain followed by '/', got {self.cdi_annotation_prefix!r}",
            )
        if not _KIND_RE.match(self.cdi_kind):
            raise ConfigError(
                "cdi kind",
                f"must be '<vendor>/<class>' (e.g. nvidia.com/gpu), got {self.cdi_kind!r}",
            )

    @property
    def only_cdi(self) -> bool:
        return all(s.is_cdi for s in self.device_list_strategies)

    def notes(self) -> tuple[str, ...]:
        """Settings that are accepted but have no effect, for the start-up log (never silent)."""
        notes = []
        if self.pass_device_specs and self.only_cdi:
            notes.append(
                "passDeviceSpecs has no effect: every device-list strategy is CDI and the spec "
                "carries the nodes"
            )
        if DeviceListStrategy.ENVVAR in self.device_list_strategies and (
            DeviceListStrategy.VOLUME_MOUNTS in self.device_list_strategies
        ):
            notes.append(
                f"volume-mounts sets {VISIBLE_DEVICES_ENV} to {VOLUME_MOUNTS_ROOT}; envvar's list "
                "is replaced"
            )
        return tuple(notes)


def response_settings(flags: Flags) -> ResponseSettings:
    """The settings for the daemon's effective config (NVIDIA: nvidiaDevRoot defaults to the driver
    root)."""
    return ResponseSettings(
        device_list_strategies=parse_device_list_strategies(flags.plugin.device_list_strategy),
        device_id_strategy=parse_device_id_strategy(flags.plugin.device_id_strategy),
        pass_device_specs=flags.plugin.pass_device_specs,
        host_dev_root=flags.nvidia_dev_root or flags.nvidia_driver_root,
        cdi_annotation_prefix=flags.plugin.cdi_annotation_prefix,
    )


@dataclass(frozen=True)
class DeviceNodes:
    """The NVIDIA device nodes present on the node: control nodes and /dev/nvidiaN minors."""

    control: tuple[str, ...] = ()  # container paths, in CONTROL_DEVICE_NODES order
    gpu_minors: frozenset[int] = frozenset()
    # NVML index -> driver minor number; absent means equal (the driver and NVML both number by PCI
    # bus order on common systems). The real backend can fill it from nvmlDeviceGetMinorNumber.
    minor_by_index: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))

    def minor_of(self, gpu_index: int) -> int:
        return self.minor_by_index.get(gpu_index, gpu_index)


def scan_device_nodes(
    dev_root: Path, minor_by_index: Mapping[int, int] | None = None
) -> DeviceNodes:
    """Which nodes exist under `dev_root` (the plugin's view of the host's /dev). Called once at
    start."""
    control = tuple(
        p for p in CONTROL_DEVICE_NODES if (dev_root / p.removeprefix("/dev/")).exists()
    )
    minors: set[int] = set()
    if dev_root.is_dir():
        for entry in dev_root.iterdir():
            match = _GPU_NODE_RE.match(entry.name)
            if match:
                minors.add(int(match.group(1)))
    return DeviceNodes(control, frozenset(minors), MappingProxyType(dict(minor_by_index or {})))


class StrategyResponseBuilder:
    """ResponseBuilder for every combination of NVIDIA's strategies (see the module docstring).

    `mig_indices` maps a MIG UUID to its (parent NVML index, MIG device index); the index ID
    strategy needs it for MIG devices and refuses, naming the device, when it is missing.
    """

    def __init__(
        self,
        settings: ResponseSettings,
        device_nodes: DeviceNodes | None = None,
        mig_indices: Mapping[str, tuple[int, int]] | None = None,
        nic_hints: Mapping[int, tuple[str, ...]] | None = None,
        imex: ImexChannels | None = None,
    ) -> None:
        self._settings = settings
        self._nodes = device_nodes or DeviceNodes()
        self._mig_indices = MappingProxyType(dict(mig_indices or {}))
        # gpuDevicePlugin.nicHints: GPU index -> its GPUDirect-close RDMA NICs; None: the setting is
        # off
        self._nic_hints = None if nic_hints is None else MappingProxyType(dict(nic_hints))
        # imex.channelIDs the node has: in every answer (allocation/imex.py)
        self._imex = imex or ImexChannels()

    def check_devices(self, devices: Iterable[Device]) -> None:
        """Fail at start-up rather than at Allocate when a device cannot be named."""
        for device in devices:
            self._name(device)

    def build(self, devices: Sequence[Device]) -> ContainerAllocation:
        ordered = sorted(devices, key=device_sort_key)
        names = _unique(self._name(d) for d in ordered)
        strategies = self._settings.device_list_strategies
        envs: dict[str, str] = {}
        mounts: tuple[Mount, ...] = ()
        annotations: dict[str, str] = {}
        cdi_devices: tuple[str, ...] = ()
        if DeviceListStrategy.ENVVAR in strategies:
            envs[VISIBLE_DEVICES_ENV] = ",".join(names)
            envs.update(self._imex.envs())
        if DeviceListStrategy.VOLUME_MOUNTS in strategies:
            envs[VISIBLE_DEVICES_ENV] = VOLUME_MOUNTS_ROOT
            mounts = tuple(
                Mount(f"{VOLUME_MOUNTS_ROOT}/{n}", "/dev/null", read_only=True) for n in names
            )
            mounts += self._imex.mounts()
        qualified = tuple(f"{self._settings.cdi_kind}={n}" for n in names)
        qualified += self._imex.cdi_devices(self._settings.cdi_kind)
        if DeviceListStrategy.CDI_ANNOTATIONS in strategies and qualified:
            annotations[self._annotation_key(qualified)] = ",".join(qualified)
        if DeviceListStrategy.CDI_CRI in strategies:
            cdi_devices = qualified
        if self._nic_hints is not None:
            # In the GPUs' order; never NCCL_* itself: the workload decides (e.g. NCCL_IB_HCA from
            # this).
            nics = _unique(
                nic
                for d in ordered
                for gpu in d.gpu_indices
                for nic in self._nic_hints.get(gpu, ())
            )
            if nics:
                envs[NIC_HINTS_ENV] = ",".join(nics)
        specs: tuple[DeviceSpec, ...] = ()
        if self._settings.pass_device_specs and not self._settings.only_cdi:
            specs = self._device_specs(ordered) + self._imex.device_specs(
                self._settings.host_dev_root
            )
        return ContainerAllocation(
            envs=MappingProxyType(envs),
            mounts=mounts,
            device_specs=specs,
            annotations=MappingProxyType(annotations),
            cdi_devices=cdi_devices,
        )

    def _name(self, device: Device) -> str:
        base = parse_device_id(device.id).base
        if self._settings.device_id_strategy is DeviceIdStrategy.UUID:
            return base
        if base.startswith(MIG_UUID_PREFIX):
            if base not in self._mig_indices:
                raise ConfigError(
                    "flags.plugin.deviceIDStrategy",
                    f"index: the MIG index of {base} is unknown to the response builder; use uuid "
                    "or pass mig_indices",
                )
            gpu, mig = self._mig_indices[base]
            return f"{gpu}:{mig}"
        if len(device.gpu_indices) != 1:
            raise ConfigError(
                "flags.plugin.deviceIDStrategy",
                f"index: device {device.id} spans GPUs {list(device.gpu_indices)}; an index names "
                "exactly one",
            )
        return str(device.gpu_indices[0])

    def _annotation_key(self, qualified: Sequence[str]) -> str:
        # NVIDIA uses a random UUID; a digest of the names is as unique per container and
        # deterministic.
        digest = hashlib.sha256(",".join(qualified).encode()).hexdigest()[:16]
        return f"{self._settings.cdi_annotation_prefix}{CDI_ANNOTATION_NAME}_{digest}"

    def _device_specs(self, devices: Sequence[Device]) -> tuple[DeviceSpec, ...]:
        minors = sorted({self._nodes.minor_of(i) for d in devices for i in d.gpu_indices})
        paths = [
            *self._nodes.control,
            *(f"/dev/nvidia{m}" for m in minors if m in self._nodes.gpu_minors),
        ]
        root = self._settings.host_dev_root.rstrip("/")
        return tuple(
            DeviceSpec(container_path=p, host_path=f"{root}{p}", permissions="rw") for p in paths
        )


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))
