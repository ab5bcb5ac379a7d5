"""Per-model resource names (`resources` in NVIDIA's config): which resource a GPU or MIG device is
served as.

    resources:
      gpus:
        - {pattern: "*A100*", name: a100}     # NVML product name, e.g. "NVIDIA A100-PCIE-40GB"
        - {pattern: "Tesla T4", name: t4}
      mig:
        - {pattern: "1g.10gb", name: mig-small}   # MIG profile name

As NVIDIA's config describes them: a pattern is a glob (`*` matches any run of characters) over the
whole product name (GPUs) or MIG profile (MIG devices), case-sensitive; the first matching entry
wins; a device no entry matches keeps its default name (`nvidia.com/gpu`,
`nvidia.com/mig-<profile>`), which is where NVIDIA's defaults (`*` -> gpu, appended last) put it. A
name gets the `nvidia.com/` prefix; it is at most 63 characters of a Kubernetes name. One resource
never mixes whole GPUs and MIG devices. (NVIDIA's plugin accepts this section and, at the time of
writing, ignores it with a warning; this plugin applies it.) The allocator, labels, metrics and DRA
attributes stay per GPU: only the name a device is served under changes, and a renamed resource is
served by its own server like any other. Boundary: a pure renaming of composed resources; the rules
are parsed at load (config/resource_names.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from device_plugin.allocation.protocols import device_sort_key
from device_plugin.config.resource_names import ResourceNaming
from device_plugin.core.devices import Device
from device_plugin.core.errors import ConfigError


def rename_resources(
    resources: Mapping[str, tuple[Device, ...]],
    naming: ResourceNaming,
    *,
    product_of: Callable[[int], str],
    mig_profile_of: Mapping[str, str],
) -> dict[str, tuple[Device, ...]]:
    """The composed default resources under the configured names, devices in canonical order.

    `product_of(gpu index)` gives a GPU's NVML product name; `mig_profile_of` maps a MIG UUID to its
    profile. Raises ConfigError when one name would hold both whole GPUs and MIG devices."""
    if naming.empty:
        return dict(resources)
    renamed: dict[str, list[Device]] = {}
    kinds: dict[str, set[str]] = {}
    for default, devices in resources.items():
        for device in devices:
            profile = mig_profile_of.get(device.id)
            if profile is None:
                name, kind = naming.gpu_name(product_of(device.gpu_indices[0])), "whole GPUs"
            else:
                name, kind = naming.mig_name(profile, default), "MIG devices"
            renamed.setdefault(name, []).append(device)
            kinds.setdefault(name, set()).add(kind)
    for name, found in sorted(kinds.items()):
        if len(found) > 1:
            raise ConfigError(
                "resources",
                f"{name} would hold both whole GPUs and MIG devices; give them different names",
            )
    return {
        name: tuple(sorted(devices, key=device_sort_key))
        for name, devices in sorted(renamed.items())
    }
