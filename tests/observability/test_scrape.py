"""Scrape /metrics over HTTP after a scripted sequence on a fake DGX-1 and check names, labels, values."""

from __future__ import annotations

import pytest

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.health import HealthConfig
from device_plugin.core.devices import Device, Health
from device_plugin.core.errors import InvalidRequestError, NvmlError, UnhealthyDeviceError
from device_plugin.dp.resource_reporting import resource_route
from device_plugin.health.state import HealthTransition
from device_plugin.node.health_routing import NodeHealth
from device_plugin.nvml.fake.machine import IDLE_TEMPERATURE_C
from device_plugin.observability.admission_metrics import result_label
from device_plugin.observability.metrics import health_reason_code
from testbed.allocation_doubles import EnvVarResponseBuilder, LowestIndexPolicy

from .conftest import RESOURCE, Served

P = "gpu_device_plugin_"
FAIL_79 = HealthTransition(3, Health.HEALTHY, Health.UNHEALTHY, "Xid 79 (GPU has fallen off the bus)", 1.0, xid=79)
RECOVER = HealthTransition(3, Health.UNHEALTHY, Health.HEALTHY, "recovered: probes passed", 2.0)


def _script(served: Served) -> list[str]:
    """Register, allocate twice, lose GPU 3 to an Xid, fail one Allocate on it, recover, restart the kubelet."""
    metrics, rm = served.metrics, served.resource
    ids = [d.id for d in rm.snapshot().devices]
    metrics.registration_state(RESOURCE, "registered")
    chosen = rm.preferred_allocation(ids, [], 2)
    metrics.preferred_allocation(RESOURCE, result_label(None))
    metrics.allocation_decision(RESOURCE, 2, 50.0, optimal=True, best_ring_bandwidth_gbps=50.0)
    rm.allocate(chosen)
    metrics.allocation(RESOURCE, result_label(None))
    metrics.observe_rpc("Allocate", RESOURCE, "OK", 0.0004)
    metrics.allocation_decision(RESOURCE, 4, 25.0, optimal=False, best_ring_bandwidth_gbps=50.0)
    served.health.deliver(FAIL_79)
    try:
        rm.allocate([ids[3]])
    except UnhealthyDeviceError as error:
        metrics.allocation(RESOURCE, result_label(error))
        metrics.observe_rpc("Allocate", RESOURCE, "INVALID_ARGUMENT", 0.0002)
    metrics.nvml_error("nvmlDeviceGetHandleByIndex")
    served.health.deliver(RECOVER)
    metrics.kubelet_restart_seen()
    metrics.registration_state(RESOURCE, "unregistered")
    metrics.registration_state(RESOURCE, "registered")
    metrics.replica_info(RESOURCE, f"{ids[0]}::0", ids[0])
    metrics.replica_info(RESOURCE, f"{ids[0]}::1", ids[0])
    return ids


def test_scripted_sequence_is_visible_in_one_scrape(served: Served) -> None:
    ids = _script(served)
    scrape = served.get("/metrics")
    assert scrape.status == 200
    v = scrape.value
    assert v(P + "allocations_total", resource=RESOURCE, result="ok") == 1
    assert v(P + "allocations_total", resource=RESOURCE, result="unhealthy_device") == 1
    assert v(P + "preferred_allocations_total", resource=RESOURCE, result="ok") == 1
    assert v(P + "rpc_duration_seconds_count", method="Allocate", resource=RESOURCE, code="OK") == 1
    assert v(P + "rpc_duration_seconds_bucket", method="Allocate", resource=RESOURCE, code="OK", le="0.0005") == 1
    assert v(P + "allocation_decisions_total", resource=RESOURCE, size="2", optimal="true") == 1
    assert v(P + "allocation_decisions_total", resource=RESOURCE, size="4", optimal="false") == 1
    assert v(P + "allocation_predicted_ring_bandwidth_gbps_sum", resource=RESOURCE, size="4") == 25.0
    assert v(P + "allocation_bandwidth_ratio_bucket", resource=RESOURCE, size="4", le="0.5") == 1
    assert v(P + "health_transitions_total", **_transition("Healthy", "Unhealthy", "xid", "79")) == 1
    assert v(P + "health_transitions_total", **_transition("Unhealthy", "Healthy", "recovered", "")) == 1
    assert v(P + "nvml_errors_total", call="nvmlDeviceGetHandleByIndex") == 1
    assert v(P + "kubelet_restarts_total") == 1
    assert v(P + "registration_state", resource=RESOURCE, state="registered") == 1
    assert v(P + "registration_state", resource=RESOURCE, state="unregistered") == 0
    assert v(P + "registration_state", resource=RESOURCE, state="failed") == 0
    assert v(P + "replica_info", resource=RESOURCE, replica_id=f"{ids[0]}::1", gpu_uuid=ids[0]) == 1
    assert v(P + "devices", resource=RESOURCE, health="Healthy") == 8
    assert v(P + "devices", resource=RESOURCE, health="Unhealthy") == 0
    gpu = served.backend.gpus()[7]
    gpu_labels = {"gpu": "7", "uuid": gpu.uuid, "model": "Tesla V100-SXM2-32GB"}
    assert v(P + "gpu_memory_total_bytes", **gpu_labels) == 32768 * 1024 * 1024
    assert v(P + "gpu_memory_used_bytes", **gpu_labels) == 0
    assert v(P + "gpu_temperature_celsius", **gpu_labels) == IDLE_TEMPERATURE_C


def _transition(before: str, after: str, reason: str, xid: str) -> dict[str, str]:
    return {"resource": RESOURCE, "from_health": before, "to_health": after, "reason": reason, "xid": xid}


def test_inventory_is_read_at_scrape_time(served: Served) -> None:
    served.resource.set_gpu_health(5, Health.UNHEALTHY, "Xid 48")
    during = served.get("/metrics")
    served.resource.set_gpu_health(5, Health.HEALTHY, "recovered")
    after = served.get("/metrics")
    assert during.value(P + "devices", resource=RESOURCE, health="Unhealthy") == 1
    assert during.value(P + "devices", resource=RESOURCE, health="Healthy") == 7
    assert after.value(P + "devices", resource=RESOURCE, health="Unhealthy") == 0


def test_closed_resource_has_no_inventory_series(served: Served) -> None:
    served.resource.close()
    assert served.get("/metrics").value(P + "devices", resource=RESOURCE, health="Healthy") is None


def test_metric_types(served: Served) -> None:
    _script(served)
    types = served.get("/metrics").types()
    expected = {
        P + "rpc_duration_seconds": "histogram",
        P + "allocations": "counter",
        P + "preferred_allocations": "counter",
        P + "allocation_decisions": "counter",
        P + "allocation_predicted_ring_bandwidth_gbps": "histogram",
        P + "allocation_bandwidth_ratio": "histogram",
        P + "registration_state": "gauge",
        P + "kubelet_restarts": "counter",
        P + "health_transitions": "counter",
        P + "nvml_errors": "counter",
        P + "replica_info": "gauge",
        P + "devices": "gauge",
    }
    assert {name: types.get(name) for name in expected} == expected


def test_forget_resource_drops_its_series(served: Served) -> None:
    _script(served)
    served.metrics.forget_resource(RESOURCE)
    scrape = served.get("/metrics")
    assert scrape.value(P + "registration_state", resource=RESOURCE, state="registered") is None
    assert not [key for key in scrape.samples() if key[0] == P + "replica_info"]
    assert served.metrics.registration_snapshot() == {}


@pytest.mark.parametrize(
    ("error", "label"),
    [
        (None, "ok"),
        (UnhealthyDeviceError("x"), "unhealthy_device"),
        (InvalidRequestError("x"), "invalid_request"),
        (NvmlError("nvmlInit", "x"), "error"),
        (RuntimeError("x"), "internal_error"),
    ],
    ids=["success", "unhealthy-before-generic-invalid", "invalid", "plugin-error", "bug"],
)
def test_result_label(error: BaseException | None, label: str) -> None:
    assert result_label(error) == label


def test_unknown_registration_state_is_a_programming_error(served: Served) -> None:
    with pytest.raises(ValueError, match="registerd"):
        served.metrics.registration_state(RESOURCE, "registerd")


@pytest.mark.parametrize(
    ("size", "bandwidth", "observed"),
    [(1, 0.0, 0), (2, float("nan"), 0), (2, -1.0, 0), (2, 75.0, 1)],
    ids=["single-gpu-has-no-ring", "nan-ignored", "negative-ignored", "valid"],
)
def test_bandwidth_histogram_only_for_real_rings(served: Served, size: int, bandwidth: float, observed: int) -> None:
    served.metrics.allocation_decision(RESOURCE, size, bandwidth, optimal=True)
    scrape = served.get("/metrics")
    count = scrape.value(P + "allocation_predicted_ring_bandwidth_gbps_count", resource=RESOURCE, size=str(size))
    assert (count or 0) == observed
    assert scrape.value(P + "allocation_decisions_total", resource=RESOURCE, size=str(size), optimal="true") == 1


def test_record_replicas_maps_each_replica_to_its_gpu_and_replaces_old_series(served: Served) -> None:
    gpus = served.backend.gpus()
    replicas = [Device(f"{g.uuid}::{n}", (g.index,), g.numa_node) for g in gpus[:2] for n in range(3)]
    whole = Device(gpus[2].uuid, (2,), gpus[2].numa_node)
    assert served.metrics.record_replicas("nvidia.com/gpu.shared", [*replicas, whole], gpus) == 6
    assert served.metrics.record_replicas("nvidia.com/gpu.shared", replicas[:2], gpus) == 2  # reload: 2 left
    series = {
        dict(labels)["replica_id"]: dict(labels)["gpu_uuid"]
        for name, labels in served.get("/metrics").samples()
        if name == P + "replica_info"
    }
    assert series == {f"{gpus[0].uuid}::0": gpus[0].uuid, f"{gpus[0].uuid}::1": gpus[0].uuid}


@pytest.mark.parametrize(
    ("transition", "expected"),
    [
        (FAIL_79, "xid"),
        (HealthTransition(0, Health.HEALTHY, Health.UNHEALTHY, "double-bit ECC error", 1.0), "unhealthy"),
        (HealthTransition(0, Health.HEALTHY, Health.UNHEALTHY, "probe failed: saw Xid 79 in dmesg", 1.0), "unhealthy"),
        (RECOVER, "recovered"),
    ],
    ids=["typed-xid", "no-xid-unhealthy", "xid-in-text-is-not-parsed", "recovery"],
)
def test_health_reasons_are_bounded_codes_from_the_typed_transition(
    transition: HealthTransition, expected: str
) -> None:
    assert health_reason_code(transition) == expected


def test_a_gpu_transition_counts_once_whatever_its_replicas_and_resources(served: Served) -> None:
    gpus = served.backend.gpus()
    shared = ResourceManager(
        RESOURCE + ".shared",
        [Device(f"{g.uuid}::{n}", (g.index,), g.numa_node) for g in gpus for n in range(4)],
        LowestIndexPolicy(),
        EnvVarResponseBuilder(),
    )
    route = NodeHealth(
        served.backend,
        gpus,
        HealthConfig(),
        route=resource_route(lambda: [served.resource, shared]),
        metrics=served.metrics,
    )
    route.deliver(FAIL_79)
    v = served.get("/metrics").value
    both = f"{RESOURCE},{RESOURCE}.shared"
    labels = {"from_health": "Healthy", "to_health": "Unhealthy", "reason": "xid", "xid": "79"}
    assert v(P + "health_transitions_total", resource=both, **labels) == 1  # one GPU, 5 devices changed
    assert v(P + "health_transitions_total", resource=RESOURCE, **labels) is None
    assert len([d for d in shared.snapshot().devices if not d.healthy]) == 4
