"""What the DRA driver reports about its node: the shared metrics, probes and node-labels file.

Boundary: wiring only. The metrics (GPU gauges read at scrape time, health transitions, process
metrics), the HTTP endpoint and the labels file are the device-plugin mode's own classes from
observability/; this module points them at a DraDriver instead of at served resources. There is no
device-plugin inventory in this mode (the kubelet holds no device-plugin resources of ours), so the
inventory gauge and the per-RPC and allocation metrics stay absent.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from device_plugin.config.model import Config
from device_plugin.dra.driver import DraDriver
from device_plugin.health.state import HealthTransition
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.telemetry import TelemetrySource
from device_plugin.observability.http_endpoint import EndpointProbeResult, HttpEndpoint, parse_metrics_address
from device_plugin.observability.labels import FeaturesFileWriter, LabelOptions, refresh_features_file
from device_plugin.observability.metrics import PluginMetrics


def dra_metrics(registry: CollectorRegistry, backend: NvmlBackend, driver: DraDriver, config: Config) -> PluginMetrics:
    """GPU gauges of the driver's current GPUs, and every health transition counted once per GPU."""
    metrics = PluginMetrics(
        registry,
        gpus=driver.gpus,
        telemetry=backend if isinstance(backend, TelemetrySource) else None,
        gpu_gauges=config.daemon.gpu_gauges,
        process_metrics=True,
    )

    def count(transition: HealthTransition) -> None:
        metrics.health_transition(transition, (driver.driver_name,))

    driver.add_health_listener(count)
    return metrics


def dra_endpoint(driver: DraDriver, config: Config, registry: CollectorRegistry) -> HttpEndpoint | None:
    """/metrics; /healthz: the slice publisher runs; /readyz: the kubelet registered us and slices are out.

    Started by the caller; None when gpuDevicePlugin.metricsAddress is off."""
    address = parse_metrics_address(config.daemon.metrics_address, field="gpuDevicePlugin.metricsAddress")
    if address is None:
        return None

    def liveness() -> EndpointProbeResult:
        ok = driver.publisher.running()
        return EndpointProbeResult(ok, "serving" if ok else f"the slice publisher stopped: {driver.publisher.error}")

    def readiness() -> EndpointProbeResult:
        status = driver.server.registration.status
        if status is None or not status[0]:
            return EndpointProbeResult(False, f"not registered with the kubelet: {status}")
        if driver.publisher.error or not driver.publisher.wait_synced(0.0):
            return EndpointProbeResult(False, f"ResourceSlices not published yet {driver.publisher.error}".strip())
        return EndpointProbeResult(True, f"registered; pool generation {driver.publisher.generation}")

    return HttpEndpoint(*address, registry, liveness=liveness, readiness=readiness)


def dra_labels(backend: NvmlBackend, config: Config) -> FeaturesFileWriter | None:
    """Write the node labels now (the same GPU and topology labels as device-plugin mode); None when off.

    The returned writer is refreshed after a rescan that changed the devices (`refresh_dra_labels`)."""
    if not config.daemon.labels_file:
        return None
    writer = FeaturesFileWriter(Path(config.daemon.labels_file), refuse_under=(Path(config.daemon.device_plugin_dir),))
    refresh_dra_labels(backend, config, writer)
    return writer


def refresh_dra_labels(backend: NvmlBackend, config: Config, writer: FeaturesFileWriter) -> None:
    refresh_features_file(backend, LabelOptions(mig_strategy=config.flags.mig_strategy), writer)
