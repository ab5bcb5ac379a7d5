"""The deploy lines deploy the pushed image; the monitoring objects scrape our Service and alert on our metrics."""

from __future__ import annotations

import re
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from device_plugin.allocation.protocols import EnvVarResponseBuilder, LowestIndexPolicy
from device_plugin.allocation.resources import ResourceManager
from device_plugin.core.devices import Device
from device_plugin.nvml.fake import FakeNvml
from device_plugin.observability.metrics import PluginMetrics
from tests.deploy.conftest import DEPLOY_DIR, container, only
from tests.deploy.render import image_name, render, set_image

MONITORING = DEPLOY_DIR / "monitoring"


def test_the_image_overlay_points_the_daemonset_at_a_registry(rendered: dict[str, list[dict[str, Any]]]) -> None:
    assert container(rendered["base"])["image"] == "gpu-device-plugin:0.1.0"
    assert container(rendered["overlays/image"])["image"] == "registry.example.com/gpu-device-plugin:0.1.0"


@pytest.mark.parametrize(
    ("image", "entry", "expected"),
    [
        ("gpu-device-plugin:0.1.0", {"name": "gpu-device-plugin", "newName": "r.io/x"}, "r.io/x:0.1.0"),
        ("gpu-device-plugin:0.1.0", {"name": "gpu-device-plugin", "newTag": "0.2.0"}, "gpu-device-plugin:0.2.0"),
        ("gpu-device-plugin", {"name": "gpu-device-plugin", "digest": "sha256:ab"}, "gpu-device-plugin@sha256:ab"),
        (
            "reg:5000/a/gpu-device-plugin:1",
            {"name": "reg:5000/a/gpu-device-plugin", "newTag": "2"},
            "reg:5000/a/gpu-device-plugin:2",
        ),
        ("other:1", {"name": "gpu-device-plugin", "newName": "r.io/x"}, "other:1"),
    ],
    ids=["new-name-keeps-tag", "new-tag", "digest", "registry-with-port", "other-image-untouched"],
)
def test_image_rewrite_follows_kustomize(image: str, entry: dict[str, str], expected: str) -> None:
    obj = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}}
    set_image(obj, entry)
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == expected


def test_image_name_strips_tag_and_digest_but_not_a_registry_port() -> None:
    assert image_name("reg:5000/a/b:1@sha256:00") == "reg:5000/a/b"


@pytest.fixture(scope="module")
def monitoring() -> list[dict[str, Any]]:
    return render(MONITORING)


def test_the_service_monitor_selects_the_metrics_service_and_port(
    monitoring: list[dict[str, Any]], rendered: dict[str, list[dict[str, Any]]]
) -> None:
    monitor = only(monitoring, "ServiceMonitor")
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


def test_every_alert_names_metrics_the_plugin_exports(monitoring: list[dict[str, Any]]) -> None:
    rule = only(monitoring, "PrometheusRule")
    rules = [r for group in rule["spec"]["groups"] for r in group["rules"]]
    assert {r["alert"] for r in rules} == REQUIRED_ALERTS
    exported = exported_metric_names()
    for r in rules:
        ours = set(re.findall(r"\bgpu_device_plugin_[a-z_]+", r["expr"]))
        assert ours <= exported, f"{r['alert']}: {sorted(ours - exported)} is not exported"
        assert r["annotations"]["summary"] and r["annotations"]["description"]
    scrape = next(r for r in rules if r["alert"] == "GpuDevicePluginScrapeDown")
    service = only(render(DEPLOY_DIR / "base"), "Service")
    assert f'job="{service["metadata"]["name"]}"' in scrape["expr"]  # the ServiceMonitor's job is the Service


def test_the_metric_name_check_catches_a_typo() -> None:
    assert "gpu_device_plugin_devics" not in exported_metric_names()
    assert "gpu_device_plugin_devices" in exported_metric_names()


@pytest.mark.parametrize(
    "overlay",
    ["dra", "dra/extended-resource", "overlays/device-plugin-pool"],
    ids=["dra", "dra-extended-resource", "device-plugin-pool"],
)
def test_every_mode_runs_the_image_the_image_overlay_names(overlay: str) -> None:
    """The README's one sed line on deploy/overlays/image sets the image for the DRA driver and the node pools too."""
    assert container(render(DEPLOY_DIR / overlay))["image"] == "registry.example.com/gpu-device-plugin:0.1.0"
