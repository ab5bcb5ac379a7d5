"""/healthz, /readyz and routing of the HTTP endpoint; metrics-address parsing."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from device_plugin.config.schema import DEFAULT_METRICS_ADDRESS
from device_plugin.core.errors import ConfigError
from device_plugin.observability.http_endpoint import (
    EndpointProbeResult,
    HttpEndpoint,
    parse_metrics_address,
    registration_readiness,
)

from .conftest import FAST_STOP_S, RESOURCE, Served, get


@pytest.mark.parametrize(
    ("alive", "status"),
    [(True, 200), (False, 503)],
    ids=["serving", "servers-down"],
)
def test_healthz_follows_liveness(served: Served, alive: bool, status: int) -> None:
    served.liveness[0] = EndpointProbeResult(alive, "gRPC servers: nvidia.com/gpu")
    reply = served.get("/healthz")
    assert (reply.status, reply.body.strip().endswith("gRPC servers: nvidia.com/gpu")) == (status, True)


@pytest.mark.parametrize(
    ("states", "status", "detail"),
    [
        ([], 503, "no resource registered"),
        (["registered"], 200, "registered: nvidia.com/gpu"),
        (["registered", "unregistered"], 503, "not registered: nvidia.com/gpu=unregistered"),
        (["failed"], 503, "nvidia.com/gpu=failed"),
        (["failed", "registered"], 200, "registered"),
    ],
    ids=["before-register", "registered", "kubelet-restarted", "register-failed", "re-registered"],
)
def test_readyz_follows_registration(served: Served, states: list[str], status: int, detail: str) -> None:
    for state in states:
        served.metrics.registration_state(RESOURCE, state)
    reply = served.get("/readyz")
    assert reply.status == status
    assert detail in reply.body


def test_readyz_waits_for_every_resource(served: Served) -> None:
    served.metrics.registration_state(RESOURCE, "registered")
    served.metrics.registration_state("nvidia.com/gpu.shared", "unregistered")
    reply = served.get("/readyz")
    assert (reply.status, "nvidia.com/gpu.shared=unregistered" in reply.body) == (503, True)


def test_a_probe_that_raises_reports_unavailable_and_the_server_survives() -> None:
    def broken() -> EndpointProbeResult:
        raise RuntimeError("lifecycle not wired")

    endpoint = HttpEndpoint(
        "127.0.0.1", 0, CollectorRegistry(), liveness=broken, readiness=broken, poll_interval_s=FAST_STOP_S
    )
    endpoint.start()
    try:
        first = get(endpoint.port, "/healthz")
        assert (first.status, "lifecycle not wired" in first.body) == (503, True)
        assert get(endpoint.port, "/metrics").status == 200
    finally:
        endpoint.stop()


@pytest.mark.parametrize("path", ["/", "/metricz", "/healthz/extra"], ids=["root", "typo", "subpath"])
def test_unknown_paths_are_404(served: Served, path: str) -> None:
    assert served.get(path).status == 404


def test_query_string_is_ignored(served: Served) -> None:
    assert served.get("/metrics?name[]=x").status == 200


def test_stop_is_idempotent_and_frees_the_port() -> None:
    endpoint = HttpEndpoint(
        "127.0.0.1", 0, CollectorRegistry(), liveness=_ok, readiness=_ok, poll_interval_s=FAST_STOP_S
    )
    endpoint.start()
    port = endpoint.port
    endpoint.stop()
    endpoint.stop()
    again = HttpEndpoint(
        "127.0.0.1", port, CollectorRegistry(), liveness=_ok, readiness=_ok, poll_interval_s=FAST_STOP_S
    )
    again.start()  # allow_reuse_address: the same port binds again at once
    try:
        assert get(port, "/healthz").status == 200
    finally:
        again.stop()


def _ok() -> EndpointProbeResult:
    return EndpointProbeResult(True, "fine")


def test_port_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        _ = HttpEndpoint(
            "127.0.0.1", 0, CollectorRegistry(), liveness=_ok, readiness=_ok, poll_interval_s=FAST_STOP_S
        ).port


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("   ", None),
        (":2112", ("", 2112)),
        ("0.0.0.0:9000", ("0.0.0.0", 9000)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:2112", ("::1", 2112)),
        (DEFAULT_METRICS_ADDRESS, ("", 2112)),
    ],
    ids=["empty-disables", "blank-disables", "all-interfaces", "host-port", "port-zero", "ipv6", "default"],
)
def test_parse_metrics_address(text: str, expected: tuple[str, int] | None) -> None:
    assert parse_metrics_address(text) == expected


@pytest.mark.parametrize(
    "text",
    ["2112", "host:", "host:http", ":70000", "::"],
    ids=["no-colon", "no-port", "named-port", "port-too-big", "bare-ipv6"],
)
def test_bad_metrics_address_names_the_field(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_metrics_address(text, field="METRICS_ADDRESS")
    assert caught.value.field == "METRICS_ADDRESS"


def test_registration_readiness_reads_live_state() -> None:
    states: dict[str, str] = {}
    probe = registration_readiness(lambda: states)
    assert not probe().ok
    states[RESOURCE] = "registered"
    assert probe().ok
