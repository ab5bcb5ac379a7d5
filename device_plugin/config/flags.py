"""NVIDIA's `flags` section (format `version: v1`), each key declared once (config/declare.py).

Boundary: the declarations of `flags` and `flags.plugin` only; config/model.py loads them. Every key
here re-serves all resources when a reload changes it (an Allocate answer or a policy may differ).
Keys NVIDIA has and this plugin does not apply are accepted so an existing ConfigMap loads; the
values that have no effect are declared (not_applied) and named in one warning
(config/not_applied.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from device_plugin.config.declare import CliFlag, Reload, section, setting
from device_plugin.config.schema import BOOL, FROZEN_MAPPING, HOST_DIR, STR, STRATEGY_LIST, choice
from device_plugin.config.sharing_model import Placement
from device_plugin.core.mig_strategy import MigStrategy

RESERVE = Reload.RESERVE
_MIG_CHOICES = "|".join(MigStrategy)  # none|single|mixed


def _frozen(value: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


# Environment variables take NVIDIA's names where NVIDIA has one. Flags' help texts are printed as
# is.
@dataclass(frozen=True)
class PluginFlags:
    pass_device_specs: bool = setting(
        "passDeviceSpecs",
        BOOL,
        default=False,
        reload=RESERVE,
        env="PASS_DEVICE_SPECS",
        cli=CliFlag(
            "--pass-device-specs",
            "Allocate also returns the device nodes (for the CPU manager)",
            "BOOL",
            optional_value=True,
        ),
    )
    device_list_strategy: tuple[str, ...] = setting(
        "deviceListStrategy",
        STRATEGY_LIST,
        default=("envvar",),
        reload=RESERVE,
        env="DEVICE_LIST_STRATEGY",
        cli=CliFlag(
            "--device-list-strategy",
            "how Allocate names the devices: envvar, volume-mounts, cdi-annotations, cdi-cri; "
            "comma-separated",
            "LIST",
        ),
    )
    device_id_strategy: str = setting(
        "deviceIDStrategy",
        choice("uuid", "index"),
        default="uuid",
        reload=RESERVE,
        env="DEVICE_ID_STRATEGY",
        cli=CliFlag("--device-id-strategy", "uuid|index: device IDs in Allocate answers"),
    )
    cdi_annotation_prefix: str = setting(
        "cdiAnnotationPrefix",
        STR,
        default="cdi.k8s.io/",
        reload=RESERVE,
        env="CDI_ANNOTATION_PREFIX",
    )
    nvidia_ctk_path: str = setting(
        "nvidiaCTKPath",
        STR,
        default="/usr/bin/nvidia-ctk",
        reload=RESERVE,
        env="NVIDIA_CTK_PATH",
        env_aliases=("NVIDIA_CDI_HOOK_PATH",),  # NVIDIA's newer name for it
        # for CDI specs, which we do not write
        not_applied=lambda value: value != "/usr/bin/nvidia-ctk",
    )
    container_driver_root: str = setting(
        "containerDriverRoot",
        STR,
        default="/driver-root",
        reload=RESERVE,
        env="CONTAINER_DRIVER_ROOT",
        env_aliases=("DRIVER_ROOT_CTR_PATH",),  # NVIDIA's newer name for it
        # NVML is loaded from the image's library path
        not_applied=lambda value: value != "/driver-root",
    )
    shared_devices_allocation_policy: str = setting(
        "sharedDevicesAllocationPolicy",
        choice(*Placement),
        default=Placement.DISTRIBUTED.value,
        reload=RESERVE,
        env="SHARED_DEVICES_ALLOCATION_POLICY",
    )


@dataclass(frozen=True)
class Flags:
    mig_strategy: str = setting(
        "migStrategy",
        choice(*MigStrategy),
        default=MigStrategy.NONE.value,
        reload=RESERVE,
        env="MIG_STRATEGY",
        cli=CliFlag("--mig-strategy", f"{_MIG_CHOICES}: how MIG devices are served", _MIG_CHOICES),
    )
    fail_on_init_error: bool = setting(
        "failOnInitError",
        BOOL,
        default=True,
        reload=RESERVE,
        env="FAIL_ON_INIT_ERROR",
        cli=CliFlag(
            "--fail-on-init-error",
            "exit when NVML cannot start (false: wait without serving)",
            "BOOL",
            optional_value=True,
        ),
    )
    nvidia_driver_root: str = setting(
        "nvidiaDriverRoot",
        HOST_DIR,
        default="/",
        reload=RESERVE,
        env="NVIDIA_DRIVER_ROOT",
        cli=CliFlag(
            "--nvidia-driver-root",
            "the host's NVIDIA driver root (device nodes for passDeviceSpecs)",
            "DIR",
        ),
    )
    # None: same as nvidia_driver_root
    nvidia_dev_root: str | None = setting(
        "nvidiaDevRoot", HOST_DIR, default=None, reload=RESERVE, env="NVIDIA_DEV_ROOT"
    )
    # DRA per-process memory shares: each shared GPU's MPS pipe and log folders (empty: ours);
    # device-plugin mode refuses sharing.mps, so there it points at nothing
    mps_root: str = setting("mpsRoot", STR, default="", reload=RESERVE, env="MPS_ROOT")
    # NVIDIA's plugin adds NVIDIA_GDRCOPY/GDS/MOFED=enabled and a `<kind>=all` CDI device to every
    # Allocate answer (the container toolkit then mounts the device nodes); this plugin does not
    # (docs/migrating.md).
    gdrcopy_enabled: bool = setting(
        "gdrcopyEnabled",
        BOOL,
        default=False,
        reload=RESERVE,
        env="GDRCOPY_ENABLED",
        not_applied=bool,
    )
    gds_enabled: bool = setting(
        "gdsEnabled", BOOL, default=False, reload=RESERVE, env="GDS_ENABLED", not_applied=bool
    )
    mofed_enabled: bool = setting(
        "mofedEnabled", BOOL, default=False, reload=RESERVE, env="MOFED_ENABLED", not_applied=bool
    )
    # GFD's: true publishes a NodeFeature object; the labels here always go to a features.d file
    # (labelsFile).
    use_node_feature_api: bool | None = setting(
        "useNodeFeatureAPI",
        BOOL,
        default=None,
        reload=RESERVE,
        env="USE_NODE_FEATURE_API",
        env_aliases=("GFD_USE_NODE_FEATURE_API",),  # gpu-feature-discovery's
        not_applied=lambda value: value is True,
    )
    # Discovery is always NVML here: auto and nvml mean that; tegra (CSV files on Jetson) is not
    # done.
    device_discovery_strategy: str = setting(
        "deviceDiscoveryStrategy",
        choice("auto", "nvml", "tegra"),
        default="auto",
        reload=RESERVE,
        env="DEVICE_DISCOVERY_STRATEGY",
        not_applied=lambda value: value == "tegra",
    )
    plugin: PluginFlags = section("plugin", PluginFlags)
    # GFD's settings: accepted so shared ConfigMaps load; this plugin ignores them.
    gfd: Mapping[str, Any] = setting(
        "gfd", FROZEN_MAPPING, default_factory=_frozen, reload=RESERVE, not_applied=bool
    )
