"""Custom Prometheus collectors that read live state at scrape time.

Boundary: each collector holds a callable, never a copy of the state, so a scrape shows what the
plugin advertises right now. A read that fails (NVML error) drops that GPU's series for this scrape
and is counted through `on_error`; a scrape never fails because one GPU cannot be read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from device_plugin.core.devices import DeviceListSnapshot, Health
from device_plugin.core.errors import NvmlError
from device_plugin.nvml.telemetry import GpuTelemetry, TelemetrySource
from device_plugin.nvml.types import GpuInfo

log = logging.getLogger(__name__)

MIB = 1024 * 1024


class DeviceInventoryCollector(Collector):
    """`<prefix>devices{resource, health}`: advertised devices per resource and health, zeros
    included."""

    def __init__(
        self, prefix: str, snapshots: Callable[[], Mapping[str, DeviceListSnapshot]]
    ) -> None:
        self._prefix = prefix
        self._snapshots = snapshots

    def describe(self) -> Iterable[Metric]:
        # Describing lets registration check names without calling into the plugin.
        return [self._family()]

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            self._prefix + "devices",
            "Devices advertised to the kubelet, by resource and health.",
            labels=("resource", "health"),
        )

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        snapshots = self._snapshots()
        for resource in sorted(snapshots):
            snapshot = snapshots[resource]
            if snapshot.closed:
                continue
            for health in Health:
                count = sum(1 for device in snapshot.devices if device.health is health)
                family.add_metric((resource, health.value), count)
        yield family


class GpuTelemetryCollector(Collector):
    """Per-GPU gauges in Prometheus base units: bytes, ratio (0-1), celsius, watts.

    A reading the GPU does not support (None) is left out rather than reported as 0.
    """

    _GAUGES = (
        (
            "gpu_memory_total_bytes",
            "GPU framebuffer memory, total.",
            lambda t: _mib(t.memory_total_mib),
        ),
        (
            "gpu_memory_used_bytes",
            "GPU framebuffer memory, used.",
            lambda t: _mib(t.memory_used_mib),
        ),
        (
            "gpu_utilization_ratio",
            "Share of time the GPU was busy (0-1).",
            lambda t: _ratio(t.utilisation_percent),
        ),
        ("gpu_temperature_celsius", "GPU core temperature.", lambda t: t.temperature_c),
        ("gpu_power_watts", "GPU board power draw.", lambda t: t.power_w),
    )

    def __init__(
        self,
        prefix: str,
        gpus: Callable[[], Iterable[GpuInfo]],
        source: TelemetrySource,
        on_error: Callable[[str], None],
    ) -> None:
        self._prefix = prefix
        self._gpus = gpus
        self._source = source
        self._on_error = on_error

    def _families(self) -> list[tuple[GaugeMetricFamily, Callable[[GpuTelemetry], float | None]]]:
        return [
            (GaugeMetricFamily(self._prefix + name, doc, labels=("gpu", "uuid", "model")), read)
            for name, doc, read in self._GAUGES
        ]

    def describe(self) -> Iterable[Metric]:
        return [family for family, _ in self._families()]

    def collect(self) -> Iterator[Metric]:
        families = self._families()
        try:
            gpus = sorted(self._gpus(), key=lambda g: g.index)
        except NvmlError as error:
            self._report(error)
            gpus = []
        for gpu in gpus:
            try:
                reading = self._source.telemetry(gpu.index)
            except NvmlError as error:
                self._report(error)
                continue
            labels = (str(gpu.index), gpu.uuid, gpu.name)
            for family, read in families:
                value = read(reading)
                if value is not None:
                    family.add_metric(labels, value)
        yield from (family for family, _ in families)

    def _report(self, error: NvmlError) -> None:
        log.warning("GPU telemetry read failed at scrape: %s", error)
        self._on_error(error.call)


def _mib(value: int | None) -> float | None:
    return None if value is None else float(value * MIB)


def _ratio(percent: float | None) -> float | None:
    return None if percent is None else percent / 100.0


class RuntimeCdiCollector(Collector):
    """`<prefix>container_runtime_cdi{runtime, version, cdi}`: 1 for what the node's container
    runtime does with CDI devices (supported, needs-enable-cdi, dropped, unknown), once the DRA
    driver has read its Node."""

    def __init__(self, prefix: str, verdict: Callable[[], tuple[str, str, str] | None]) -> None:
        self._prefix = prefix
        self._verdict = verdict

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            self._prefix + "container_runtime_cdi",
            "1 for the node's container runtime and what it does with the CDI devices of prepared "
            "claims "
            "(cdi: supported, needs-enable-cdi, dropped or unknown); no series before the Node was "
            "read.",
            labels=("runtime", "version", "cdi"),
        )

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        verdict = self._verdict()
        if verdict is not None:
            family.add_metric(verdict, 1)
        yield family


class PodGpuCollector(Collector):
    """`<prefix>pod_gpu_info{namespace, pod, container, uuid, resource}`: 1 for each GPU (or MIG
    device) a container holds, read at scrape time from the kubelet (node/pod_gpus.py); no series
    when the read fails, which `<prefix>pod_resources_errors_total` counts in the same scrape."""

    def __init__(
        self, prefix: str, read: Callable[[], Iterable[tuple[str, str, str, str, str]]]
    ) -> None:
        self._prefix = prefix
        self._read = read
        self._lock = threading.Lock()
        self._errors = 0

    def describe(self) -> Iterable[Metric]:
        return [
            self._family(),
            CounterMetricFamily(self._prefix + "pod_resources_errors", _ERRORS_HELP),
        ]

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            self._prefix + "pod_gpu_info",
            "1 for each GPU or MIG device (uuid) a pod's container holds, by the kubelet's "
            "pod-resources API; "
            "`resource` is the device plugin's resource name or the DRA driver's name. Join DCGM's "
            "series on "
            "the UUID (docs/observability.md).",
            labels=("namespace", "pod", "container", "uuid", "resource"),
        )

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        try:
            rows = list(self._read())
        except Exception:  # the reader logged why; a scrape never fails for it
            with self._lock:
                self._errors += 1
            rows = []
        for row in rows:
            family.add_metric(row, 1)
        yield family
        with self._lock:
            errors = self._errors
        yield CounterMetricFamily(self._prefix + "pod_resources_errors", _ERRORS_HELP, value=errors)


_ERRORS_HELP = (
    "Scrapes whose read of the kubelet's pod-resources API failed (the log says why, once per "
    "reason)."
)
