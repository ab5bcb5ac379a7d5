"""GPUs per pod for /metrics: the kubelet's pod-resources answer joined with the node's UUIDs, the metric it
makes, and what a failed read does (no series, one count, one log line per reason)."""

from __future__ import annotations

import logging
from dataclasses import astuple
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from device_plugin.dra_helper.pod_resources import ContainerDevice, PodResourcesError
from device_plugin.node.pod_gpus import PodGpu, PodGpuReader, pod_gpus
from device_plugin.observability.metrics import PluginMetrics

GPU_A, GPU_B, MIG = "GPU-aaaa", "GPU-bbbb", "MIG-cccc"
NODE = frozenset({GPU_A, GPU_B, MIG})


def held(source: str, device: str, cdi: tuple[str, ...] = (), container: str = "main") -> ContainerDevice:
    return ContainerDevice("ns", "pod-1", container, source, device, cdi)


JOINS = [
    pytest.param([held("nvidia.com/gpu", GPU_A)], [(GPU_A, "nvidia.com/gpu")], id="a-whole-gpu-by-device-id"),
    pytest.param(
        [held("nvidia.com/gpu.shared", f"{GPU_B}::3")], [(GPU_B, "nvidia.com/gpu.shared")], id="a-time-sliced-replica"
    ),
    pytest.param([held("nvidia.com/mig-1g.10gb", MIG)], [(MIG, "nvidia.com/mig-1g.10gb")], id="a-mig-device"),
    pytest.param(
        [held("gpu.gpu-device-plugin.io", "gpu-3", (f"nvidia.com/gpu={GPU_A}",))],
        [(GPU_A, "gpu.gpu-device-plugin.io")],
        id="a-dra-device-by-its-cdi-name",
    ),
    pytest.param([held("nic.example.com", "eth0", ("example.com/nic=eth0",))], [], id="another-drivers-device"),
    pytest.param([held("nvidia.com/gpu", "GPU-not-on-this-node")], [], id="a-uuid-of-another-node"),
    pytest.param(
        [held("nvidia.com/gpu", GPU_A), held("nvidia.com/gpu", f"{GPU_A}::0")],
        [(GPU_A, "nvidia.com/gpu")],
        id="the-same-gpu-twice-counts-once",
    ),
]


@pytest.mark.parametrize(("devices", "expected"), JOINS)
def test_a_containers_devices_are_joined_to_this_nodes_uuids(
    devices: list[ContainerDevice], expected: list[tuple[str, str]]
) -> None:
    assert [(p.uuid, p.resource) for p in pod_gpus(devices, NODE)] == expected


def test_the_answer_does_not_depend_on_the_order_the_kubelet_lists_in() -> None:
    devices = [held("nvidia.com/gpu", GPU_B, container="b"), held("nvidia.com/gpu", GPU_A, container="a")]
    assert pod_gpus(devices, NODE) == pod_gpus(list(reversed(devices)), NODE)


def scrape(rows: list[PodGpu] | Exception) -> str:
    def read() -> list[tuple[str, str, str, str, str]]:
        if isinstance(rows, Exception):
            raise rows
        return [astuple(r) for r in rows]

    metrics = PluginMetrics(CollectorRegistry())
    metrics.pod_gpus(read)
    return generate_latest(metrics.registry).decode()


def test_each_gpu_a_container_holds_is_one_series() -> None:
    text = scrape([PodGpu("ns", "pod-1", "main", GPU_A, "nvidia.com/gpu")])
    assert (
        'gpu_device_plugin_pod_gpu_info{container="main",namespace="ns",pod="pod-1",resource="nvidia.com/gpu",'
        f'uuid="{GPU_A}"}} 1.0'
    ) in text
    assert "gpu_device_plugin_pod_resources_errors_total 0.0" in text


def test_a_failed_read_leaves_no_series_and_is_counted_and_the_scrape_still_answers() -> None:
    text = scrape(PodResourcesError("/x/kubelet.sock: List failed: UNAVAILABLE: gone"))
    assert "gpu_device_plugin_pod_gpu_info{" not in text
    assert "gpu_device_plugin_pod_resources_errors_total 1.0" in text


def test_a_missing_socket_is_said_once_not_at_every_scrape(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    reader = PodGpuReader(tmp_path, lambda: NODE)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            with pytest.raises(PodResourcesError, match="no socket there"):
                reader()
    assert len([r for r in caplog.records if "GPUs per pod are not exported" in r.getMessage()]) == 1
    assert str(tmp_path / "pod-resources" / "kubelet.sock") in caplog.text
