"""Fixtures for the observability tests: a fake machine's resource, a registry, a running endpoint."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.health import HealthConfig
from device_plugin.core.devices import Device
from device_plugin.dp.resource_reporting import resource_route
from device_plugin.node.health_routing import NodeHealth
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.observability.http_endpoint import EndpointProbeResult, HttpEndpoint, registration_readiness
from device_plugin.observability.metrics import PluginMetrics
from testbed.allocation_doubles import EnvVarResponseBuilder, LowestIndexPolicy

RESOURCE = "nvidia.com/gpu"
FAST_STOP_S = 0.02  # serving-loop poll in tests: stop() returns within it


def resource_for(backend: FakeNvml) -> ResourceManager:
    devices = [Device(g.uuid, (g.index,), g.numa_node) for g in backend.gpus()]
    return ResourceManager(RESOURCE, devices, LowestIndexPolicy(), EnvVarResponseBuilder())


@dataclass
class Scrape:
    status: int
    body: str

    def samples(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(self.body)
            for sample in family.samples
        }

    def value(self, name: str, **labels: str) -> float | None:
        return self.samples().get((name, frozenset(labels.items())))

    def types(self) -> dict[str, str]:
        return {family.name: family.type for family in text_string_to_metric_families(self.body)}


def get(port: int, path: str) -> Scrape:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return Scrape(response.status, response.read().decode())
    except urllib.error.HTTPError as error:
        return Scrape(error.code, error.read().decode())


@dataclass
class Served:
    backend: FakeNvml
    resource: ResourceManager
    metrics: PluginMetrics
    endpoint: HttpEndpoint
    liveness: list[EndpointProbeResult]  # the test sets liveness[0]
    health: NodeHealth

    def get(self, path: str) -> Scrape:
        return get(self.endpoint.port, path)


@pytest.fixture
def served() -> Iterator[Served]:
    backend = FakeNvml.from_machine("dgx1-v100")
    resource = resource_for(backend)
    registry = CollectorRegistry()
    metrics = PluginMetrics(
        registry,
        device_snapshots=lambda: {resource.resource_name: resource.snapshot()},
        gpus=backend.gpus,
        telemetry=backend,
    )
    # The daemon's health route, fed transitions by the test instead of a running watcher.
    health = NodeHealth(
        backend, backend.gpus(), HealthConfig(), route=resource_route(lambda: [resource]), metrics=metrics
    )
    liveness = [EndpointProbeResult(True, "1 gRPC server serving")]
    endpoint = HttpEndpoint(
        "127.0.0.1",
        0,
        registry,
        liveness=lambda: liveness[0],
        readiness=registration_readiness(metrics.registration_snapshot),
        poll_interval_s=FAST_STOP_S,
    )
    endpoint.start()
    try:
        yield Served(backend, resource, metrics, endpoint, liveness, health)
    finally:
        endpoint.stop()
