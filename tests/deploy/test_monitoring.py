"""deploy/monitoring: the ServiceMonitor scrapes our metrics Service, and every alert names metrics we export."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry

from device_plugin.allocation.resources import ResourceManager
from device_plugin.core.devices import Device
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.observability.metrics import PluginMetrics
from testbed.allocation_doubles import EnvVarResponseBuilder, LowestIndexPolicy
from tests.deploy.conftest import Rendered, only


def test_the_service_monitor_selects_the_metrics_service_and_port(rendered: Rendered) -> None:
    monitor = only(rendered["monitoring"], "ServiceMonitor")
    service = only(rendered["base"], "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [p["name"] for p in service["spec"]["ports"]]


def exported_metric_names() -> set[str]:
    """Every family name a device-plugin-mode registry exports (counters also as <name>_total)."""
    backend = FakeNvml.from_machine("dgx1-v100")
    resource = ResourceManager(
        "nvidia.com/gpu",
        [Device(g.uuid, (g.index,), g.numa_node) for g in backend.gpus()],
        LowestIndexPolicy(),
        EnvVarResponseBuilder(),
    )
    registry = CollectorRegistry()
    PluginMetrics(registry, device_snapshots=lambda: {resource.resource_name: resource.snapshot()})
    names = set()
    for family in registry.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        if family.type == "counter":
            names.add(family.name + "_total")
    return names


REQUIRED_ALERTS = {"GpuDevicePluginScrapeDown", "GpuUnhealthy", "GpuDevicePluginNotRegistered", "GpuAllocationRefused"}


def test_every_alert_names_metrics_the_plugin_exports(rendered: Rendered) -> None:
    rule = only(rendered["monitoring"], "PrometheusRule")
    rules = [r for group in rule["spec"]["groups"] for r in group["rules"]]
    assert {r["alert"] for r in rules} == REQUIRED_ALERTS
    exported = exported_metric_names()
    for r in rules:
        ours = set(re.findall(r"\bgpu_device_plugin_[a-z_]+", r["expr"]))
        assert ours <= exported, f"{r['alert']}: {sorted(ours - exported)} is not exported"
        assert r["annotations"]["summary"] and r["annotations"]["description"]
    scrape = next(r for r in rules if r["alert"] == "GpuDevicePluginScrapeDown")
    service = only(rendered["base"], "Service")
    assert f'job="{service["metadata"]["name"]}"' in scrape["expr"]  # the ServiceMonitor's job is the Service


def test_the_metric_name_check_catches_a_typo() -> None:
    assert "gpu_device_plugin_devics" not in exported_metric_names()
    assert "gpu_device_plugin_devices" in exported_metric_names()
