"""PluginMetrics: every Prometheus metric the plugin exports, on an injected registry.

Boundary: callers (servicer, lifecycle, health, allocator) report events through the methods below;
values that already live elsewhere (device lists, GPU telemetry) are read at scrape time by the
collectors in device_plugin/observability/collectors.py, so they can never go stale. Nothing here
touches the global prometheus_client registry, NVML or gRPC; serving /metrics is
device_plugin/observability/http_endpoint.py.

Label cardinality is bounded on purpose: `reason` is a short code ("xid", "recovered", "unhealthy"),
never free text, and `size` is an allocation size (<= GPUs per node). Health transitions arrive
typed (device_plugin.health.state.HealthTransition): the Xid label is the transition's Xid field,
and each transition of a physical GPU counts once, however many devices (replicas, MIG devices) it
backs. The admission RPCs' series (latency, results, decisions) are
observability/admission_metrics.py's, owned and exported here.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector

from device_plugin.core.devices import Device, DeviceListSnapshot
from device_plugin.core.ids import parse_device_id
from device_plugin.health.state import HealthTransition
from device_plugin.nvml.telemetry import TelemetrySource
from device_plugin.nvml.types import GpuInfo
from device_plugin.observability.admission_metrics import PREFIX, AdmissionMetrics
from device_plugin.observability.collectors import (
    DeviceInventoryCollector,
    GpuTelemetryCollector,
    PodGpuCollector,
    RuntimeCdiCollector,
)

log = logging.getLogger(__name__)

REGISTRATION_STATES = ("registered", "unregistered", "failed")
DeviceSnapshots = Callable[[], Mapping[str, DeviceListSnapshot]]


def health_reason_code(transition: HealthTransition) -> str:
    """The bounded `reason` label of a transition: "xid" when an Xid caused it, else "recovered" or
    "unhealthy"."""
    if transition.xid is not None:
        return "xid"
    return "recovered" if transition.healthy else "unhealthy"


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
        """`device_snapshots` feeds the inventory gauge; `gpus` + `telemetry` feed the GPU gauges,
        which `gpu_gauges=False` turns off (nodes where DCGM exporter already reports them).
        `process_metrics` adds prometheus_client's process_* CPU/RSS metrics (only meaningful in the
        daemon)."""
        self.registry = registry
        self._lock = threading.Lock()
        self._registration: dict[str, str] = {}
        self._replicas: dict[str, set[tuple[str, str]]] = {}
        r = registry
        if telemetry is not None and not isinstance(telemetry, TelemetrySource):
            raise TypeError(
                f"telemetry source {type(telemetry).__name__} has no telemetry(index) method"
            )
        # Scrape-time collectors first: an NVML error they count then shows in the same scrape.
        if device_snapshots is not None:
            registry.register(DeviceInventoryCollector(PREFIX, device_snapshots))
        if gpu_gauges and gpus is not None and telemetry is not None:
            registry.register(
                GpuTelemetryCollector(PREFIX, gpus, telemetry, on_error=self.nvml_error)
            )
        self.admission = AdmissionMetrics(registry)
        # The servicer's RpcObserver hook and the decision hook's entry, one series lookup each.
        self.rpc_finished = self.admission.rpc_finished
        self.observe_rpc = self.admission.observe_rpc
        self.allocation = self.admission.allocation
        self.preferred_allocation = self.admission.preferred_allocation
        self.allocation_decision = self.admission.allocation_decision
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
            "Physical GPU health transitions by reason code and Xid ('' when not an Xid); one "
            "count per GPU "
            "transition, `resource` naming the resources the GPU backs (comma-separated).",
            ("resource", "from_health", "to_health", "reason", "xid"),
            registry=r,
        )
        self.nvml_errors = Counter(
            PREFIX + "nvml_errors", "Failed NVML calls by call name.", ("call",), registry=r
        )
        self.attributes_dropped = Counter(
            PREFIX + "dra_attributes_dropped",
            "DRA: attributes left out of a device over the API's 32 attributes and capacities, by "
            "attribute.",
            ("attribute",),
            registry=r,
        )
        self.replicas = Gauge(
            PREFIX + "replica_info",
            "Always 1: maps a shared (time-sliced) replica ID to the physical GPU behind it.",
            ("resource", "replica_id", "gpu_uuid"),
            registry=r,
        )
        if process_metrics:
            ProcessCollector(registry=registry)

    def dra_attributes_dropped(self, attributes: Iterable[str]) -> None:
        for attribute in attributes:
            self.attributes_dropped.labels(attribute).inc()

    def pod_gpus(self, read: Callable[[], Iterable[tuple[str, str, str, str, str]]]) -> None:
        """GPUs per pod, read at scrape time: (namespace, pod, container, uuid, resource) rows."""
        self.registry.register(PodGpuCollector(PREFIX, read))

    def container_runtime_cdi(self, verdict: Callable[[], tuple[str, str, str] | None]) -> None:
        """The DRA driver's word on the runtime and CDI, read at scrape time: (runtime, version,
        cdi) or None."""
        self.registry.register(RuntimeCdiCollector(PREFIX, verdict))

    # ---- registration ------------------------------------------------------------------------

    def registration_state(self, resource: str, state: str) -> None:
        """Record the resource's registration state: one of REGISTRATION_STATES (else
        ValueError)."""
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

    def health_transition(
        self, transition: HealthTransition, resources: Iterable[str] = ()
    ) -> None:
        """Count one physical GPU's transition once. `resources`: the resources whose devices it
        changed, joined sorted into the `resource` label ("" when it backs none, e.g. a MIG GPU with
        no devices)."""
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

    def record_replicas(
        self, resource: str, devices: Iterable[Device], gpus: Iterable[GpuInfo]
    ) -> int:
        """replica_info for every replica among `devices` (IDs "<id>::<n>"), GPU UUID by NVML index.

        Replaces the resource's earlier replica series (a config reload may change the replica
        count). Returns how many replicas were recorded."""
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
