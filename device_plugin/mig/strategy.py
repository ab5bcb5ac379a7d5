"""MIG strategies: which resources a node advertises, compatible with NVIDIA's `migStrategy` values.

- none:   whole GPUs as nvidia.com/gpu. A MIG-enabled GPU is NOT advertised (NVIDIA's plugin lists
  it as
          a whole nvidia.com/gpu, and a pod that gets it fails at runtime: CUDA sees no device on a
          MIG-enabled GPU without a MIG UUID). It is logged and left out; its MIG devices are
          ignored.
- single: every MIG-enabled GPU offers one identical profile, advertised as nvidia.com/gpu (one
  device
          per MIG device). Refused (ConfigError on flags.migStrategy) when the profiles differ, when
          a MIG-enabled GPU has no MIG devices, or when MIG-enabled and whole GPUs share the node
          (NVIDIA refuses that too: one resource name would mean two different things). With no
          MIG-enabled GPU at all it advertises the whole GPUs, as NVIDIA does.
- mixed:  nvidia.com/mig-<profile> per profile, "+" turned into "." (1g.10gb+me -> mig-1g.10gb.me);
          whole GPUs stay nvidia.com/gpu. Compute instances smaller than their GPU instance
          ("1c.3g.20gb") are skipped with a warning, as NVIDIA registers only full-instance
          profiles.
Device IDs are GPU or MIG UUIDs; gpu_indices is the (parent) GPU; the NUMA node is the parent's, so
MIG devices keep theirs. Only resources with at least one device appear in the result.
Boundary: pure function of discovered value types; raises ConfigError, never returns a silent
default.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from device_plugin.allocation.protocols import device_sort_key
from device_plugin.core.devices import Device
from device_plugin.core.errors import ConfigError
from device_plugin.core.mig_strategy import STRATEGY_FIELD, MigStrategy
from device_plugin.core.names import NVIDIA_DOMAIN
from device_plugin.nvml.mig_types import MigDevice
from device_plugin.nvml.types import GpuInfo

log = logging.getLogger(__name__)


def gpu_resource(domain: str = NVIDIA_DOMAIN) -> str:
    return f"{domain}/gpu"


def mig_resource(profile: str, domain: str = NVIDIA_DOMAIN) -> str:
    """nvidia.com/mig-<profile>, with "+" (not allowed in resource names) turned into "."."""
    return f"{domain}/mig-{profile.replace('+', '.')}"


Resources = dict[str, tuple[Device, ...]]


def build_resources(
    backend_gpus: Sequence[GpuInfo],
    mig_devices_by_gpu: Mapping[int, Sequence[MigDevice]],
    strategy: MigStrategy | str,
    *,
    domain: str = NVIDIA_DOMAIN,
) -> Resources:
    """Resource name -> devices (canonical order), for GPUs and the MIG devices of MIG-enabled GPUs.

    `mig_devices_by_gpu` has a key for every GPU whose MIG mode is currently enabled (an empty
    sequence when it has no MIG devices yet); GPUs without a key are whole GPUs. See
    mig.discovery.discover.
    """
    strategy = MigStrategy.parse(strategy) if isinstance(strategy, str) else strategy
    gpus = {gpu.index: gpu for gpu in backend_gpus}
    unknown = sorted(set(mig_devices_by_gpu) - set(gpus))
    if unknown:
        raise ConfigError(
            STRATEGY_FIELD,
            f"MIG devices listed for GPUs {unknown} that the backend does not report",
        )
    whole = [gpu for index, gpu in sorted(gpus.items()) if index not in mig_devices_by_gpu]
    enabled = sorted(mig_devices_by_gpu)
    if strategy is MigStrategy.NONE:
        for index in enabled:
            log.warning(
                "migStrategy none: GPU %d (%s) has MIG enabled and is not advertised; a whole-GPU "
                "request on it "
                "would fail at runtime. Use migStrategy single or mixed, or disable MIG on it",
                index,
                gpus[index].uuid,
            )
        return _finish({gpu_resource(domain): [_gpu_device(gpu) for gpu in whole]})
    if strategy is MigStrategy.SINGLE:
        if not enabled:
            return _finish({gpu_resource(domain): [_gpu_device(gpu) for gpu in whole]})
        return _finish({gpu_resource(domain): _single(gpus, mig_devices_by_gpu, whole)})
    resources: dict[str, list[Device]] = {gpu_resource(domain): [_gpu_device(gpu) for gpu in whole]}
    for index in enabled:
        devices = mig_devices_by_gpu[index]
        if not devices:
            log.warning(
                "migStrategy mixed: GPU %d (%s) has MIG enabled but no MIG devices",
                index,
                gpus[index].uuid,
            )
        for mig in devices:
            if not mig.whole_instance:
                log.warning(
                    "migStrategy mixed: skipping %s (%s) on GPU %d: a compute instance smaller "
                    "than its GPU "
                    "instance is not advertised",
                    mig.uuid,
                    mig.profile,
                    index,
                )
                continue
            resources.setdefault(mig_resource(mig.profile, domain), []).append(
                _mig_device(mig, gpus[index])
            )
    return _finish(resources)


def _single(
    gpus: Mapping[int, GpuInfo],
    mig_devices_by_gpu: Mapping[int, Sequence[MigDevice]],
    whole: list[GpuInfo],
) -> list[Device]:
    if whole:
        raise ConfigError(
            STRATEGY_FIELD,
            f"single needs MIG enabled on every GPU or on none: GPUs {sorted(mig_devices_by_gpu)} "
            "have it, "
            f"GPUs {[gpu.index for gpu in whole]} do not; use mixed",
        )
    empty = [index for index, devices in sorted(mig_devices_by_gpu.items()) if not devices]
    if empty:
        raise ConfigError(
            STRATEGY_FIELD, f"single: GPUs {empty} have MIG enabled but no MIG devices"
        )
    by_profile: dict[str, list[int]] = {}
    for index, devices in sorted(mig_devices_by_gpu.items()):
        for mig in devices:
            gpu_list = by_profile.setdefault(mig.profile, [])
            if index not in gpu_list:
                gpu_list.append(index)
    if len(by_profile) > 1:
        found = "; ".join(
            f"{profile} on GPUs {indices}" for profile, indices in sorted(by_profile.items())
        )
        raise ConfigError(
            STRATEGY_FIELD, f"single needs one MIG profile on every GPU, found {found}; use mixed"
        )
    profile = next(iter(by_profile))
    if "c." in profile:
        raise ConfigError(
            STRATEGY_FIELD, f"single: {profile} is a compute instance smaller than its GPU instance"
        )
    return [
        _mig_device(mig, gpus[index])
        for index, devices in mig_devices_by_gpu.items()
        for mig in devices
    ]


def _gpu_device(gpu: GpuInfo) -> Device:
    return Device(id=gpu.uuid, gpu_indices=(gpu.index,), numa_node=gpu.numa_node)


def _mig_device(mig: MigDevice, parent: GpuInfo) -> Device:
    return Device(id=mig.uuid, gpu_indices=(parent.index,), numa_node=parent.numa_node)


def _finish(resources: Mapping[str, list[Device]]) -> Resources:
    return {
        name: tuple(sorted(devices, key=device_sort_key))
        for name, devices in sorted(resources.items())
        if devices
    }
