"""AdmissionMetrics: what the kubelet's two admission RPCs report (latency, results, allocation
quality).

Boundary: the RPC latency histogram, the Allocate and GetPreferredAllocation result counters and the
whole-GPU decision series, on an injected registry; PluginMetrics (observability/metrics.py) owns
one and exports these methods. Nothing here touches NVML or gRPC.

The two reports an admission RPC makes (rpc_finished from the servicer, allocation_decision from the
whole-GPU policy) each find every series they touch with one lookup (observability/series.py), not
one `.labels()` call per series. A decision's bandwidth series appear at the first decision of their
size. `size` is an allocation size (<= GPUs per node), so the label cardinality stays bounded.
"""

from __future__ import annotations

import logging
import math

from prometheus_client import CollectorRegistry, Counter, Histogram

from device_plugin.core.errors import (
    InvalidRequestError,
    PluginError,
    UnhealthyDeviceError,
    UnknownDeviceError,
)
from device_plugin.observability.series import SeriesCache

log = logging.getLogger(__name__)

PREFIX = "gpu_device_plugin_"
# gRPC handlers answer in well under a millisecond on the fast path; seconds mean lock contention or
# NVML.
RPC_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)
# One-direction ring bandwidth in GB/s: PCIe across sockets (~10) up to B200 NVSwitch (900).
BANDWIDTH_BUCKETS_GBPS = (8, 12, 16, 25, 32, 50, 75, 100, 150, 200, 300, 450, 600, 900, 1800)
RATIO_BUCKETS = (0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)

# the RPCs with a `result` counter
_RESULT_COUNTED = frozenset({"Allocate", "GetPreferredAllocation"})


def result_label(error: BaseException | None) -> str:
    """The `result` label for a request that ended with `error` (None: success). Subclasses
    first."""
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


class AdmissionMetrics:
    """The admission path's series. Thread-safe: prometheus_client metrics lock internally."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.rpc_duration = Histogram(
            PREFIX + "rpc_duration_seconds",
            "Device-plugin gRPC handler latency by method, resource and gRPC status code.",
            ("method", "resource", "code"),
            buckets=RPC_BUCKETS_S,
            registry=registry,
        )
        self.allocations = Counter(
            PREFIX + "allocations",
            "Allocate container requests by resource and result.",
            ("resource", "result"),
            registry=registry,
        )
        self.preferred_allocations = Counter(
            PREFIX + "preferred_allocations",
            "GetPreferredAllocation container requests by resource and result.",
            ("resource", "result"),
            registry=registry,
        )
        self.decisions = Counter(
            PREFIX + "allocation_decisions",
            "Allocation decisions by size and whether the chosen set had the best ring bandwidth "
            "available.",
            ("resource", "size", "optimal"),
            registry=registry,
        )
        self.predicted_bandwidth = Histogram(
            PREFIX + "allocation_predicted_ring_bandwidth_gbps",
            "Predicted one-direction ring bandwidth (GB/s) of each multi-GPU allocation.",
            ("resource", "size"),
            buckets=BANDWIDTH_BUCKETS_GBPS,
            registry=registry,
        )
        self.bandwidth_ratio = Histogram(
            PREFIX + "allocation_bandwidth_ratio",
            "Predicted ring bandwidth of each multi-GPU allocation divided by the best any set of "
            "the free GPUs had.",
            ("resource", "size"),
            buckets=RATIO_BUCKETS,
            registry=registry,
        )
        self.nic_distance = Counter(
            PREFIX + "allocation_nic_distance",
            "Allocations by predicted GPU-NIC distance: the farthest of the chosen GPUs' distances "
            "to their nearest "
            "RDMA NIC (PIX, PXB: GPUDirect-close; PHB, NODE, SYS: through the CPU). Only on nodes "
            "with NICs.",
            ("resource", "size", "distance"),
            registry=registry,
        )
        self._rpc_series = SeriesCache(self._bind_rpc)
        self._decision_series = SeriesCache(self._bind_decision)

    def rpc_finished(
        self, method: str, resource: str, code: str, duration_s: float, error: BaseException | None
    ) -> None:
        """The servicer's RpcObserver hook: latency for every RPC, results for the two that
        allocate."""
        result = result_label(error) if method in _RESULT_COUNTED else ""
        duration, results = self._rpc_series((method, resource, code, result))
        duration.observe(duration_s)
        if results is not None:
            results.inc()

    def _bind_rpc(self, key: tuple[str, str, str, str]) -> tuple[Histogram, Counter | None]:
        method, resource, code, result = key
        counted = {
            "Allocate": self.allocations,
            "GetPreferredAllocation": self.preferred_allocations,
        }.get(method)
        results = None if counted is None else counted.labels(resource, result)
        return self.rpc_duration.labels(method, resource, code), results

    def observe_rpc(self, method: str, resource: str, code: str, duration_s: float) -> None:
        """One unary RPC (not ListAndWatch, whose duration is the stream's lifetime). `code`: gRPC
        status name."""
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
        decided, nic, bandwidth, ratio = self._decision_series(
            (resource, size, optimal, nic_distance)
        )
        decided.inc()
        if nic is not None:
            nic.inc()
        if bandwidth is None or ratio is None:
            return
        if not math.isfinite(predicted_ring_bandwidth_gbps) or predicted_ring_bandwidth_gbps < 0:
            log.warning(
                "%s: ignoring predicted ring bandwidth %r for size %d",
                resource,
                predicted_ring_bandwidth_gbps,
                size,
            )
            return
        bandwidth.observe(predicted_ring_bandwidth_gbps)
        if (
            best_ring_bandwidth_gbps is not None
            and math.isfinite(best_ring_bandwidth_gbps)
            and best_ring_bandwidth_gbps > 0
        ):
            ratio.observe(min(predicted_ring_bandwidth_gbps / best_ring_bandwidth_gbps, 1.0))

    def _bind_decision(
        self, key: tuple[str, int, bool, str | None]
    ) -> tuple[Counter, Counter | None, Histogram | None, Histogram | None]:
        resource, size, optimal, nic_distance = key
        size_label = str(size)
        decided = self.decisions.labels(resource, size_label, "true" if optimal else "false")
        nic = (
            None
            if nic_distance is None
            else self.nic_distance.labels(resource, size_label, nic_distance)
        )
        if size < 2:
            return decided, nic, None, None
        return (
            decided,
            nic,
            self.predicted_bandwidth.labels(resource, size_label),
            self.bandwidth_ratio.labels(resource, size_label),
        )
