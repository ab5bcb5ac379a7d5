"""What a replica can count on, and the words that say what time-slicing does not give.

Boundary: arithmetic over AdvertisedResources and a memory table the caller builds from NVML
(GPU UUID or MIG UUID -> memory in MiB). For the labels issue and the `topology` output.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from device_plugin.core.errors import PluginError
from device_plugin.timeslice.replicas import AdvertisedResources

NO_MEMORY_ISOLATION_WARNING = (
    "time-slicing has no memory or fault isolation: every replica sees the whole GPU memory, "
    "one process can exhaust it or crash the others, and the per-replica memory is a share, not a "
    "limit"
)


def replica_memory_mib(
    advertised: AdvertisedResources, memory_mib_by_id: Mapping[str, int]
) -> Mapping[str, int]:
    """Per shared resource: the memory one replica can count on, memory // replicas of its smallest
    device.

    The smallest device decides because the kubelet may hand a pod a replica of any of them.
    """
    result: dict[str, int] = {}
    for name, shared in advertised.shared.items():
        missing = sorted(set(shared.base_ids) - set(memory_mib_by_id))
        if missing:
            raise PluginError(f"{name}: no memory size known for {', '.join(missing)}")
        result[name] = min(memory_mib_by_id[i] for i in shared.base_ids) // shared.replicas
    return MappingProxyType(result)


def describe_sharing(
    advertised: AdvertisedResources, memory_mib_by_id: Mapping[str, int]
) -> tuple[str, ...]:
    """One line per shared resource for human output, then the isolation warning (nothing if none
    shared)."""
    if not advertised.shared:
        return ()
    per_replica = replica_memory_mib(advertised, memory_mib_by_id)
    lines = []
    for name, shared in advertised.shared.items():
        options = [shared.placement.value]
        if shared.require_distinct_gpus:
            options.append("requireDistinctGPUs")
        if shared.fail_requests_greater_than_one:
            options.append("failRequestsGreaterThanOne")
        lines.append(
            f"{name}: {len(shared.base_ids)} x {shared.replicas} time-sliced replicas of "
            f"{shared.source_name} "
            f"({', '.join(options)}); a replica can count on {per_replica[name]} MiB"
        )
    lines.append(f"WARNING: {NO_MEMORY_ISOLATION_WARNING}")
    return tuple(lines)
