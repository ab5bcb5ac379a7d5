"""The admission path's series are bound once per label combination and then counted by one lookup."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from device_plugin.core.errors import UnknownDeviceError
from device_plugin.observability.admission_metrics import AdmissionMetrics
from device_plugin.observability.series import SeriesCache

P = "gpu_device_plugin_"


def test_a_key_is_bound_once_however_often_it_is_looked_up() -> None:
    bound: list[str] = []

    def bind(key: str) -> str:
        bound.append(key)
        return key.upper()

    cache = SeriesCache(bind)
    assert [cache(k) for k in ("a", "b", "a", "a", "b")] == ["A", "B", "A", "A", "B"]
    assert bound == ["a", "b"] and len(cache) == 2


@pytest.mark.parametrize(
    ("method", "error", "counter", "result"),
    [
        ("GetPreferredAllocation", None, "preferred_allocations_total", "ok"),
        ("Allocate", UnknownDeviceError("x"), "allocations_total", "unknown_device"),
    ],
    ids=["preferred-ok", "allocate-unknown-device"],
)
def test_each_rpc_counts_its_latency_and_result_every_time(
    method: str, error: Exception | None, counter: str, result: str
) -> None:
    registry = CollectorRegistry()
    metrics = AdmissionMetrics(registry)
    for _ in range(3):
        metrics.rpc_finished(method, "nvidia.com/gpu", "OK", 0.0003, error)
    labels = {"method": method, "resource": "nvidia.com/gpu", "code": "OK"}
    assert registry.get_sample_value(P + "rpc_duration_seconds_count", labels) == 3
    assert registry.get_sample_value(P + counter, {"resource": "nvidia.com/gpu", "result": result}) == 3


def test_rpcs_without_a_result_counter_count_latency_only() -> None:
    registry = CollectorRegistry()
    metrics = AdmissionMetrics(registry)
    metrics.rpc_finished("GetDevicePluginOptions", "nvidia.com/gpu", "OK", 0.0001, None)
    labels = {"method": "GetDevicePluginOptions", "resource": "nvidia.com/gpu", "code": "OK"}
    assert registry.get_sample_value(P + "rpc_duration_seconds_count", labels) == 1
    assert registry.get_sample_value(P + "allocations_total", {"resource": "nvidia.com/gpu", "result": ""}) is None


def test_repeated_decisions_of_one_kind_all_count() -> None:
    registry = CollectorRegistry()
    metrics = AdmissionMetrics(registry)
    for _ in range(2):
        metrics.allocation_decision("r", 4, 50.0, False, 100.0, nic_distance="PIX")
    assert (
        registry.get_sample_value(P + "allocation_decisions_total", {"resource": "r", "size": "4", "optimal": "false"})
        == 2
    )
    assert (
        registry.get_sample_value(
            P + "allocation_nic_distance_total", {"resource": "r", "size": "4", "distance": "PIX"}
        )
        == 2
    )
    assert registry.get_sample_value(P + "allocation_bandwidth_ratio_sum", {"resource": "r", "size": "4"}) == 1.0
