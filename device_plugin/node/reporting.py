"""What the runtime reports about the node it serves, in either mode: metrics, the HTTP endpoint,
node labels.

Boundary: building and refreshing these outputs from the config, the front-end's probes and its
label inputs; what only the device-plugin mode reports, from its composed Node, is
dp/resource_reporting.py's. The inventory and the GPU gauges read through callables pointed at what
is served now, so a rescan that finds other GPUs or devices shows at the next scrape; the DRA
front-end has no inventory gauge (no device-plugin resources), so its per-resource series stay
absent. No gRPC, no threads of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from prometheus_client import CollectorRegistry

from device_plugin.config.model import Config
from device_plugin.config.safe_write import kubelet_owned_dirs
from device_plugin.node.front_end_protocol import FrontEnd
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.telemetry import TelemetrySource
from device_plugin.nvml.types import GpuInfo
from device_plugin.observability.http_endpoint import HttpEndpoint, parse_metrics_address
from device_plugin.observability.labels import (
    FeaturesFileWriter,
    LabelOptions,
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
    """The runtime's metrics: the inventory gauge from `inventory` (None: none), gauges of `gpus()`,
    both read at scrape time, process metrics, and the counters the front-end and health routing
    feed."""
    return PluginMetrics(
        registry,
        device_snapshots=inventory,
        gpus=gpus,
        telemetry=backend if isinstance(backend, TelemetrySource) else None,
        gpu_gauges=gpu_gauges,
        process_metrics=True,
    )


def node_endpoint(
    config: Config, registry: CollectorRegistry, front_end: FrontEnd
) -> HttpEndpoint | None:
    """/metrics, /healthz and /readyz (the front-end's probes) on gpuDevicePlugin.metricsAddress;
    None when that is off. Started by the runtime first: a bind failure (EndpointBindError) is
    fatal."""
    address = parse_metrics_address(
        config.daemon.metrics_address, field="gpuDevicePlugin.metricsAddress"
    )
    if address is None:
        return None
    return HttpEndpoint(
        *address, registry, liveness=front_end.liveness, readiness=front_end.readiness
    )


def labels_writer(labels_file: str, device_plugin_dir: Path) -> FeaturesFileWriter | None:
    if not labels_file:
        return None
    return FeaturesFileWriter(Path(labels_file), refuse_under=kubelet_owned_dirs(device_plugin_dir))


def refresh_labels(
    backend: NvmlBackend,
    options: LabelOptions,
    writer: FeaturesFileWriter | None,
    topology: Topology | None,
) -> None:
    """`topology`: the node's, not rebuilt (None: the labels read it afresh)."""
    if writer is not None:
        refresh_features_file(backend, options, writer, topology)
