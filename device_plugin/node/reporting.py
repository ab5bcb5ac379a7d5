"""What the runtime reports about the node it serves, in either mode: metrics, the HTTP endpoint, node labels.

Boundary: building and refreshing these outputs from the config, the front-end's probes and label inputs,
and (device-plugin mode) a composed Node (device_plugin/node/composition.py). The inventory and the GPU
gauges read through callables pointed at what is served now, so a rescan that finds other GPUs or
devices shows at the next scrape; the DRA front-end has no inventory gauge (no device-plugin resources),
so its per-resource series stay absent. MIG resources are told apart by the resource's own `is_mig` (set
at composition), never by their names. No gRPC, no threads of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from prometheus_client import CollectorRegistry

from device_plugin.allocation.resources import ResourceManager
from device_plugin.allocator.decision import AllocationDecision
from device_plugin.config.model import Config
from device_plugin.config.safe_write import kubelet_owned_dirs
from device_plugin.core.mig_strategy import MigStrategy
from device_plugin.node.composition import Node
from device_plugin.node.front_end import FrontEnd
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.telemetry import TelemetrySource
from device_plugin.nvml.types import GpuInfo
from device_plugin.observability.http_endpoint import HttpEndpoint, parse_metrics_address
from device_plugin.observability.labels import (
    FeaturesFileWriter,
    LabelOptions,
    MigResourceLabelInput,
    SharingLabelInput,
    refresh_features_file,
)
from device_plugin.observability.metrics import DeviceSnapshots, PluginMetrics
from device_plugin.topology.model import Topology


def node_metrics(
    registry: CollectorRegistry,
    backend: NvmlBackend,
    inventory: DeviceSnapshots | None,
    gpus: Callable[[], Iterable[GpuInfo]],
    *,
    gpu_gauges: bool,
) -> PluginMetrics:
    """The runtime's metrics: the inventory gauge from `inventory` (None: none), gauges of `gpus()`, both
    read at scrape time, process metrics, and the counters the front-end and health routing feed."""
    return PluginMetrics(
        registry,
        device_snapshots=inventory,
        gpus=gpus,
        telemetry=backend if isinstance(backend, TelemetrySource) else None,
        gpu_gauges=gpu_gauges,
        process_metrics=True,
    )


def decision_hook(metrics: Callable[[], PluginMetrics]) -> Callable[[str, AllocationDecision], None]:
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


def record_replicas(metrics: PluginMetrics, node: Node, resources: Iterable[ResourceManager]) -> None:
    """replica_info for the shared (time-sliced) resources among `resources`, and none for the others (a
    reload may stop sharing a resource under the same name: its earlier replica series must go)."""
    for resource in resources:
        shared = resource.resource_name in node.advertised.shared
        metrics.record_replicas(resource.resource_name, resource.snapshot().devices if shared else (), node.gpus)


def node_endpoint(config: Config, registry: CollectorRegistry, front_end: FrontEnd) -> HttpEndpoint | None:
    """/metrics, /healthz and /readyz (the front-end's probes) on gpuDevicePlugin.metricsAddress; None when
    that is off. Started by the runtime first: a bind failure (EndpointBindError) is fatal."""
    address = parse_metrics_address(config.daemon.metrics_address, field="gpuDevicePlugin.metricsAddress")
    if address is None:
        return None
    return HttpEndpoint(*address, registry, liveness=front_end.liveness, readiness=front_end.readiness)


def labels_writer(labels_file: str, device_plugin_dir: Path) -> FeaturesFileWriter | None:
    if not labels_file:
        return None
    return FeaturesFileWriter(Path(labels_file), refuse_under=kubelet_owned_dirs(device_plugin_dir))


def refresh_labels(
    backend: NvmlBackend, options: LabelOptions, writer: FeaturesFileWriter | None, topology: Topology | None
) -> None:
    """`topology`: the node's, not rebuilt (None: the labels read it afresh)."""
    if writer is not None:
        refresh_features_file(backend, options, writer, topology)


def label_options(node: Node, config: Config) -> LabelOptions:
    """What the node labels need to know beyond the backend in device-plugin mode: sharing and the MIG
    resources served."""
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
    # GFD's per-profile labels are for resources named by their MIG profile: migStrategy mixed. Under
    # single, the MIG devices are nvidia.com/gpu and the gpu.* labels describe them.
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
