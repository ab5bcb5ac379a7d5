"""GPU gauges read at scrape time: units, omitted readings, NVML failures, the DCGM switch."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from device_plugin.core.errors import NvmlError
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.telemetry import GpuTelemetry
from device_plugin.observability.metrics import PluginMetrics

from .conftest import Scrape

P = "gpu_device_plugin_"


@dataclass
class ScriptedTelemetry:
    """A TelemetrySource whose readings the test sets per GPU; an index in `failing` raises like NVML."""

    readings: dict[int, GpuTelemetry] = field(default_factory=dict)
    failing: set[int] = field(default_factory=set)

    def telemetry(self, index: int) -> GpuTelemetry:
        if index in self.failing:
            raise NvmlError("nvmlDeviceGetUtilizationRates", "GPU is lost", device=f"GPU {index}", code=15)
        return self.readings.get(index, GpuTelemetry(index))


def _scrape(registry: CollectorRegistry) -> Scrape:
    return Scrape(200, generate_latest(registry).decode())


def _setup(source: ScriptedTelemetry, *, gpu_gauges: bool = True) -> tuple[CollectorRegistry, FakeNvml]:
    backend = FakeNvml.from_machine("workstation-4gpu")
    registry = CollectorRegistry()
    PluginMetrics(registry, gpus=backend.gpus, telemetry=source, gpu_gauges=gpu_gauges)
    return registry, backend


def test_gauges_in_base_units_with_gpu_labels() -> None:
    source = ScriptedTelemetry({0: GpuTelemetry(0, 49140, 1024, 37.5, 61.0, 212.5)})
    registry, backend = _setup(source)
    gpu = backend.gpus()[0]
    labels = {"gpu": "0", "uuid": gpu.uuid, "model": gpu.name}
    scrape = _scrape(registry)
    assert scrape.value(P + "gpu_memory_total_bytes", **labels) == 49140 * 1024 * 1024
    assert scrape.value(P + "gpu_memory_used_bytes", **labels) == 1024 * 1024 * 1024
    assert scrape.value(P + "gpu_utilization_ratio", **labels) == 0.375
    assert scrape.value(P + "gpu_temperature_celsius", **labels) == 61.0
    assert scrape.value(P + "gpu_power_watts", **labels) == 212.5


def test_unsupported_readings_are_omitted_not_zero() -> None:
    source = ScriptedTelemetry({1: GpuTelemetry(1, memory_total_mib=49140, memory_used_mib=0)})
    registry, _ = _setup(source)
    gpus_with_power = {labels["gpu"] for (name, labels) in _names(_scrape(registry)) if name == P + "gpu_power_watts"}
    assert gpus_with_power == set()
    used = {labels["gpu"] for (name, labels) in _names(_scrape(registry)) if name == P + "gpu_memory_used_bytes"}
    assert used == {"1"}


def test_a_failing_gpu_drops_its_series_and_counts_the_error() -> None:
    source = ScriptedTelemetry({i: GpuTelemetry(i, temperature_c=50.0) for i in range(4)}, failing={2})
    registry, _ = _setup(source)
    scrape = _scrape(registry)
    temps = {labels["gpu"] for (name, labels) in _names(scrape) if name == P + "gpu_temperature_celsius"}
    assert temps == {"0", "1", "3"}
    assert scrape.value(P + "nvml_errors_total", call="nvmlDeviceGetUtilizationRates") == 1  # in the same scrape


def test_gauges_can_be_switched_off_for_dcgm_nodes() -> None:
    registry, _ = _setup(ScriptedTelemetry({0: GpuTelemetry(0, temperature_c=50.0)}), gpu_gauges=False)
    assert not [name for name, _ in _names(_scrape(registry)) if name.startswith(P + "gpu_")]


@pytest.mark.parametrize(
    "make",
    [
        lambda: GpuTelemetry(0, memory_used_mib=-1),
        lambda: GpuTelemetry(0, utilisation_percent=101.0),
        lambda: GpuTelemetry(0, power_w=-5.0),
    ],
    ids=["negative-memory", "over-100-percent", "negative-power"],
)
def test_impossible_readings_are_rejected(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


def _names(scrape: Scrape) -> list[tuple[str, dict[str, str]]]:
    return [(name, dict(labels)) for (name, labels) in scrape.samples()]
