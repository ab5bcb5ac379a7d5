"""NIC labels (count, share of GPUs with a close NIC) and the per-allocation GPU-NIC distance metric."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from device_plugin.core.names import OWN_DOMAIN
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.observability.labels import compute_labels
from device_plugin.observability.metrics import PREFIX, PluginMetrics
from tests.allocation.machines import allocator_of

# (NIC count, share of GPUs with a PIX/PXB NIC), from each machine file's hardware comments.
LABELS = {
    "dgx1-v100": ("4", "1"),
    "dgx-a100": ("8", "1"),
    "hgx-h100": ("8", "1"),
    "pcie-8gpu-2socket": ("2", "0.5"),
    "pcie-8gpu-2nic": ("2", "0.5"),
    "hgx-h200": ("0", None),
    "single-gpu": ("0", None),
}


@pytest.mark.parametrize("machine", sorted(LABELS))
def test_nic_labels(machine: str) -> None:
    labels = compute_labels(FakeNvml.from_machine(machine))
    count, fraction = LABELS[machine]
    assert labels[f"{OWN_DOMAIN}/rdma-nic-count"] == count
    assert labels.get(f"{OWN_DOMAIN}/gpudirect-close-gpu-fraction") == fraction


DISTANCES = [
    ("pcie-8gpu-2nic", [2, 3], "PIX"),
    ("pcie-8gpu-2nic", [0, 2], "NODE"),
    ("dgx-a100", [0, 1, 2, 3], "PXB"),
    ("pcie-8gpu-2socket", [6], "NODE"),
    ("workstation-4gpu", [0, 1], None),
]


@pytest.mark.parametrize(
    ("machine", "available", "distance"),
    DISTANCES,
    ids=[
        "both GPUs share a switch with a NIC",
        "one GPU has no close NIC: the farthest decides",
        "two-level switches",
        "single GPU, NIC on the socket's other switch",
        "no NICs: no distance",
    ],
)
def test_decision_carries_the_predicted_nic_distance(machine: str, available: list[int], distance: str | None) -> None:
    allocator = allocator_of(machine)
    decision = allocator.describe(allocator.allocate(available, [], len(available)), len(available))
    assert decision.nic_distance == distance


def test_metric_counts_allocations_by_nic_distance() -> None:
    registry = CollectorRegistry()
    metrics = PluginMetrics(registry)
    metrics.allocation_decision("nvidia.com/gpu", 2, 24.0, True, 24.0, nic_distance="PIX")
    metrics.allocation_decision("nvidia.com/gpu", 2, 12.0, True, 24.0, nic_distance="NODE")
    metrics.allocation_decision("nvidia.com/gpu", 2, 24.0, True, 24.0, nic_distance="PIX")
    metrics.allocation_decision("nvidia.com/gpu", 1, 0.0, True, 0.0)  # a node without NICs: not counted
    name = PREFIX + "allocation_nic_distance_total"

    def value(distance: str, size: str = "2") -> float | None:
        labels = {"resource": "nvidia.com/gpu", "size": size, "distance": distance}
        return registry.get_sample_value(name, labels)

    assert (value("PIX"), value("NODE"), value("SYS")) == (2.0, 1.0, None)
