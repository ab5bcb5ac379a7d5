"""What the device-plugin mode reports beyond the runtime's outputs: allocation quality, replicas,
label inputs, and the health route to the resources served.

Boundary: functions over a composed Node (dp/composition.py) and its ResourceManagers; the runtime's
metrics and labels themselves are node/reporting.py's. MIG resources are told apart by the
resource's own `is_mig` (set at composition), never by their names. No gRPC, no threads of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.model import Config
from device_plugin.core.mig_strategy import MigStrategy
from device_plugin.dp.composition import Node
from device_plugin.gpu_sets.decision import AllocationDecision
from device_plugin.health.state import HealthTransition
from device_plugin.node.health_routing import HealthRoute
from device_plugin.observability.labels import (
    LabelOptions,
    MigResourceLabelInput,
    SharingLabelInput,
)
from device_plugin.observability.metrics import PluginMetrics


def resource_route(resources: Callable[[], Sequence[ResourceManager]]) -> HealthRoute:
    """The device plugin's route: each resource served now (read at each transition, so a rebuild's
    swap is seen) takes the transition; the names of those whose devices changed."""

    def route(transition: HealthTransition) -> list[str]:
        return [r.resource_name for r in resources() if r.on_health_transition(transition)]

    return route


def decision_hook(
    metrics: Callable[[], PluginMetrics],
) -> Callable[[str, AllocationDecision], None]:
    """The allocation-quality hook composition gives each whole-GPU resource's policy."""

    def on_decision(resource: str, decision: AllocationDecision) -> None:
        metrics().allocation_decision(
            resource,
            decision.size,
            decision.ring_bandwidth_gbps,
            decision.optimal,
            decision.best_possible_gbps,
            nic_distance=decision.nic_distance,
        )

    return on_decision


def record_replicas(
    metrics: PluginMetrics, node: Node, resources: Iterable[ResourceManager]
) -> None:
    """replica_info for the shared (time-sliced) resources among `resources`, and none for the
    others (a reload may stop sharing a resource under the same name: its earlier replica series
    must go)."""
    for resource in resources:
        shared = resource.resource_name in node.advertised.shared
        metrics.record_replicas(
            resource.resource_name, resource.snapshot().devices if shared else (), node.gpus
        )


def label_options(node: Node, config: Config) -> LabelOptions:
    """What the node labels need to know beyond the backend in device-plugin mode: sharing and the
    MIG resources served."""
    sharing = {
        name: SharingLabelInput(
            "time-slicing",
            shared.replicas,
            renamed=name != shared.source_name,
            replica_memory_mib=node.replica_memory_mib.get(name),
        )
        for name, shared in node.advertised.shared.items()
    }
    mig_by_uuid = {d.uuid: d for devices in node.mig.devices_by_gpu.values() for d in devices}
    mig_resources = {}
    # GFD's per-profile labels are for resources named by their MIG profile: migStrategy mixed.
    # Under single, the MIG devices are nvidia.com/gpu and the gpu.* labels describe them.
    per_profile = config.flags.mig_strategy == MigStrategy.MIXED
    for resource in node.resources:
        if not (resource.is_mig and per_profile):
            continue
        devices = [mig_by_uuid[d.id] for d in resource.snapshot().devices if d.id in mig_by_uuid]
        if devices:
            mig_resources[resource.resource_name] = MigResourceLabelInput(
                count=len(devices),
                memory_mib=min(d.memory_mib for d in devices),
                multiprocessors=min(d.multiprocessor_count for d in devices),
            )
    return LabelOptions(
        mig_strategy=config.flags.mig_strategy,
        sharing=sharing,
        mig_resources=mig_resources,
        own_domain=config.daemon.own_domain,
    )
