"""PluginMetrics: every Prometheus metric the plugin exports, on an injected registry.

Boundary: callers (servicer, lifecycle, health, allocator) report events through the methods below;
values that already live elsewhere (device lists, GPU telemetry) are read at scrape time by the
collectors in device_plugin/observability/collectors.py, so they can never go stale. Nothing here touches
the global prometheus_client registry, NVML or gRPC; serving /metrics is device_plugin/observability/http_endpoint.py.

Label cardinality is bounded on purpose: `reason` is a short code ("xid", "recovered", "unhealthy"),
never free text, and `size` is an allocation size (<= GPUs per node). Health transitions arrive typed
(device_plugin.health.state.HealthTransition): the Xid label is the transition's Xid field, and each
transition of a physical GPU counts once, however many devices (replicas, MIG devices) it backs.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

from device_plugin.core.devices import Device, DeviceListSnapshot
from device_plugin.core.errors import InvalidRequestError, PluginError, UnhealthyDeviceError, UnknownDeviceError
from device_plugin.core.ids import parse_device_id
from device_plugin.health.state import HealthTransition
from device_plugin.nvml.telemetry import TelemetrySource
from device_plugin.nvml.types import GpuInfo
from device_plugin.observability.collectors import DeviceInventoryCollector, GpuTelemetryCollector

log = logging.getLogger(__name__)

PREFIX = "gpu_device_plugin_"
REGISTRATION_STATES = ("registered", "unregistered", "failed")
# gRPC handlers answer in well under a millisecond on the fast path; seconds mean lock contention or NVML.
RPC_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# One-direction ring bandwidth in GB/s: PCIe across sockets (~10) up to B200 NVSwitch (900).
BANDWIDTH_BUCKETS_GBPS = (8, 12, 16, 25, 32, 50, 75, 100, 150, 200, 300, 450, 600, 900, 1800)
RATIO_BUCKETS = (0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)

DeviceSnapshots = Callable[[], Mapping[str, DeviceListSnapshot]]


def health_reason_code(transition: HealthTransition) -> str:
    """The bounded `reason` label of a transition: "xid" when an Xid caused it, else "recovered" or "unhealthy"."""
    if transition.xid is not None:
        return "xid"
    return "recovered" if transition.healthy else "unhealthy"


def result_label(error: BaseException | None) -> str:
    """The `result` label for a request that ended with `error` (None: success). Subclasses first."""
    if error is None:
        return "ok"
    for kind, label in (
        (UnhealthyDeviceError, "unhealthy_device"),
        (UnknownDeviceError, "unknown_device"),
        (InvalidRequestError, "invalid_request"),
        (PluginError, "error"),
    ):
        if isinstance(error, kind):
            return label
    return "internal_error"


class PluginMetrics:
    """The plugin's metrics. Thread-safe: prometheus_client metrics lock internally."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        device_snapshots: DeviceSnapshots | None = None,
        gpus: Callable[[], Iterable[GpuInfo]] | None = None,
        telemetry: TelemetrySource | None = None,
        gpu_gauges: bool = True,
        process_metrics: bool = False,
    ) -> None:
        """`device_snapshots` feeds the inventory gauge; `gpus` + `telemetry` feed the GPU gauges, which
        `gpu_gauges=False` turns off (nodes where DCGM exporter already reports them). `process_metrics`
        adds prometheus_client's process_* CPU/RSS metrics (only meaningful in the daemon)."""
        self.registry = registry
        self._lock = threading.Lock()
        self._registration: dict[str, str] = {}
        self._replicas: dict[str, set[tuple[str, str]]] = {}
        r = registry
        if telemetry is not None and not isinstance(telemetry, TelemetrySource):
            raise TypeError(f"telemetry source {type(telemetry).__name__} has no telemetry(index) method")
        # Scrape-time collectors first: an NVML error they count then shows in the same scrape.
        if device_snapshots is not None:
            registry.register(DeviceInventoryCollector(PREFIX, device_snapshots))
        if gpu_gauges and gpus is not None and telemetry is not None:
            registry.register(GpuTelemetryCollector(PREFIX, gpus, telemetry, on_error=self.nvml_error))
        self.rpc_duration = Histogram(
            PREFIX + "rpc_duration_seconds",
            "Device-plugin gRPC handler latency by method, resource and gRPC status code.",
            ("method", "resource", "code"),
            buckets=RPC_BUCKETS_S,
            registry=r,
        )
        self.allocations = Counter(
            PREFIX + "allocations",
            "Allocate container requests by resource and result.",
            ("resource", "result"),
            registry=r,
        )
        self.preferred_allocations = Counter(
            PREFIX + "preferred_allocations",
            "GetPreferredAllocation container requests by resource and result.",
            ("resource", "result"),
            registry=r,
        )
        self.decisions = Counter(
            PREFIX + "allocation_decisions",
            "Allocation decisions by size and whether the chosen set had the best ring bandwidth available.",
            ("resource", "size", "optimal"),
            registry=r,
        )
        self.predicted_bandwidth = Histogram(
            PREFIX + "allocation_predicted_ring_bandwidth_gbps",
            "Predicted one-direction ring bandwidth (GB/s) of each multi-GPU allocation.",
            ("resource", "size"),
            buckets=BANDWIDTH_BUCKETS_GBPS,
            registry=r,
        )
        self.bandwidth_ratio = Histogram(
            PREFIX + "allocation_bandwidth_ratio",
            "Predicted ring bandwidth of each multi-GPU allocation divided by the best any set of the free GPUs had.",
            ("resource", "size"),
            buckets=RATIO_BUCKETS,
            registry=r,
        )
        self.nic_distance = Counter(
            PREFIX + "allocation_nic_distance",
            "Allocations by predicted GPU-NIC distance: the farthest of the chosen GPUs' distances to their nearest "
            "RDMA NIC (PIX, PXB: GPUDirect-close; PHB, NODE, SYS: through the CPU). Only on nodes with NICs.",
            ("resource", "size", "distance"),
            registry=r,
        )
        self.registration = Gauge(
            PREFIX + "registration_state",
            "1 for the current kubelet registration state of each resource, 0 for the others.",
            ("resource", "state"),
            registry=r,
        )
        self.kubelet_restarts = Counter(
            PREFIX + "kubelet_restarts", "Kubelet restarts seen (socket re-created).", registry=r
        )
        self.health_transitions = Counter(
            PREFIX + "health_transitions",
            "Physical GPU health transitions by reason code and Xid ('' when not an Xid); one count per GPU "
            "transition, `resource` naming the resources the GPU backs (comma-separated).",
            ("resource", "from_health", "to_health", "reason", "xid"),
            registry=r,
        )
        self.nvml_errors = Counter(PREFIX + "nvml_errors", "Failed NVML calls by call name.", ("call",), registry=r)
        self.replicas = Gauge(
            PREFIX + "replica_info",
            "Always 1: maps a shared (time-sliced) replica ID to the physical GPU behind it.",
            ("resource", "replica_id", "gpu_uuid"),
            registry=r,
        )
        if process_metrics:
            ProcessCollector(registry=registry)

    # ---- requests ----------------------------------------------------------------------------

    def rpc_finished(
        self, method: str, resource: str, code: str, duration_s: float, error: BaseException | None
    ) -> None:
        """The servicer's RpcObserver hook: latency for every RPC, results for the two that allocate."""
        self.observe_rpc(method, resource, code, duration_s)
        if method == "Allocate":
            self.allocation(resource, result_label(error))
        elif method == "GetPreferredAllocation":
            self.preferred_allocation(resource, result_label(error))

    def observe_rpc(self, method: str, resource: str, code: str, duration_s: float) -> None:
        """One unary RPC (not ListAndWatch, whose duration is the stream's lifetime). `code`: gRPC status name."""
        self.rpc_duration.labels(method, resource, code).observe(duration_s)

    def allocation(self, resource: str, result: str) -> None:
        self.allocations.labels(resource, result).inc()

    def preferred_allocation(self, resource: str, result: str) -> None:
        self.preferred_allocations.labels(resource, result).inc()

    def allocation_decision(
        self,
        resource: str,
        size: int,
        predicted_ring_bandwidth_gbps: float,
        optimal: bool,
        best_ring_bandwidth_gbps: float | None = None,
        nic_distance: str | None = None,
    ) -> None:
        """One allocator decision. Bandwidth histograms only for size >= 2 (one GPU has no ring)."""
        self.decisions.labels(resource, str(size), "true" if optimal else "false").inc()
        if nic_distance is not None:
            self.nic_distance.labels(resource, str(size), nic_distance).inc()
        if size < 2:
            return
        if not math.isfinite(predicted_ring_bandwidth_gbps) or predicted_ring_bandwidth_gbps < 0:
            log.warning(
                "%s: ignoring predicted ring bandwidth %r for size %d", resource, predicted_ring_bandwidth_gbps, size
            )
            return
        self.predicted_bandwidth.labels(resource, str(size)).observe(predicted_ring_bandwidth_gbps)
        if (
            best_ring_bandwidth_gbps is not None
            and math.isfinite(best_ring_bandwidth_gbps)
            and best_ring_bandwidth_gbps > 0
        ):
            ratio = min(predicted_ring_bandwidth_gbps / best_ring_bandwidth_gbps, 1.0)
            self.bandwidth_ratio.labels(resource, str(size)).observe(ratio)

    # ---- registration ------------------------------------------------------------------------

    def registration_state(self, resource: str, state: str) -> None:
        """Record the resource's registration state: one of REGISTRATION_STATES (else ValueError)."""
        if state not in REGISTRATION_STATES:
            raise ValueError(f"registration state {state!r} is not one of {REGISTRATION_STATES}")
        with self._lock:
            self._registration[resource] = state
            for candidate in REGISTRATION_STATES:
                self.registration.labels(resource, candidate).set(1 if candidate == state else 0)

    def registration_snapshot(self) -> dict[str, str]:
        """resource -> current state, for the /readyz probe."""
        with self._lock:
            return dict(self._registration)

    def kubelet_restart_seen(self) -> None:
        self.kubelet_restarts.inc()

    def forget_resource(self, resource: str) -> None:
        """The resource is gone (config reload): drop its registration state and replica series."""
        with self._lock:
            self._registration.pop(resource, None)
            for candidate in REGISTRATION_STATES:
                _remove(self.registration, resource, candidate)
            for replica_id, gpu_uuid in self._replicas.pop(resource, set()):
                _remove(self.replicas, resource, replica_id, gpu_uuid)

    # ---- health, NVML, sharing ---------------------------------------------------------------

    def health_transition(self, transition: HealthTransition, resources: Iterable[str] = ()) -> None:
        """Count one physical GPU's transition once. `resources`: the resources whose devices it changed,
        joined sorted into the `resource` label ("" when it backs none, e.g. a MIG GPU with no devices)."""
        xid = "" if transition.xid is None else str(transition.xid)
        self.health_transitions.labels(
            ",".join(sorted(set(resources))),
            transition.before.value,
            transition.after.value,
            health_reason_code(transition),
            xid,
        ).inc()

    def nvml_error(self, call: str) -> None:
        self.nvml_errors.labels(call).inc()

    def record_replicas(self, resource: str, devices: Iterable[Device], gpus: Iterable[GpuInfo]) -> int:
        """replica_info for every replica among `devices` (IDs "<id>::<n>"), GPU UUID by NVML index.

        Replaces the resource's earlier replica series (a config reload may change the replica count).
        Returns how many replicas were recorded."""
        uuid_by_index = {gpu.index: gpu.uuid for gpu in gpus}
        with self._lock:
            for replica_id, gpu_uuid in self._replicas.pop(resource, set()):
                _remove(self.replicas, resource, replica_id, gpu_uuid)
        recorded = 0
        for device in devices:
            if parse_device_id(device.id).replica is None or len(device.gpu_indices) != 1:
                continue
            self.replica_info(resource, device.id, uuid_by_index[device.gpu_indices[0]])
            recorded += 1
        return recorded

    def replica_info(self, resource: str, replica_id: str, gpu_uuid: str) -> None:
        with self._lock:
            self._replicas.setdefault(resource, set()).add((replica_id, gpu_uuid))
            self.replicas.labels(resource, replica_id, gpu_uuid).set(1)


def _remove(metric: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):  # never set: nothing to remove
        metric.remove(*labels)
