"""telemetry(index) on both NVML backends: the fake's fixed idle readings, and RealNvml's translation of
NVML's units (bytes, milliwatts) and of NOT_SUPPORTED into None, over the pynvml stand-in."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from device_plugin.core.errors import NvmlError
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.machine import IDLE_POWER_W, IDLE_TEMPERATURE_C, FakeNvml
from device_plugin.nvml.real.backend import RealNvml
from device_plugin.nvml.telemetry import GpuTelemetry, TelemetrySource
from tests.nvml.nvml_standin import NVML_ERROR_NOT_SUPPORTED, NVMLError, NvmlStandin

MIB = 1024 * 1024


@pytest.mark.parametrize("machine", shipped_machine_names())
def test_fake_reports_an_idle_gpu_of_its_description(machine: str) -> None:
    fake = FakeNvml.from_machine(machine)
    assert isinstance(fake, TelemetrySource)
    for gpu in fake.gpus():
        assert fake.telemetry(gpu.index) == GpuTelemetry(
            gpu.index, gpu.memory_mib, 0, 0.0, IDLE_TEMPERATURE_C, IDLE_POWER_W
        )


@pytest.mark.parametrize(("index", "closed"), [(99, False), (0, True)], ids=["no-such-gpu", "closed-backend"])
def test_fake_telemetry_errors_like_nvml(index: int, closed: bool) -> None:
    fake = FakeNvml.from_machine("single-gpu")
    if closed:
        fake.close()
    with pytest.raises(NvmlError):
        fake.telemetry(index)


class TelemetryStandin(NvmlStandin):
    """The pynvml stand-in plus the four telemetry calls, with power unsupported on `no_power` GPUs."""

    def __init__(self, fake: FakeNvml, no_power: set[int]) -> None:
        super().__init__(fake)
        self._no_power = no_power

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        total = self._gpus[handle].memory_mib * MIB
        return SimpleNamespace(total=total, used=1536 * MIB + 100, free=total - 1536 * MIB - 100)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=42, memory=7)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == 0  # NVML_TEMPERATURE_GPU
        return 57

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        if handle in self._no_power:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return 301250  # milliwatts


def _real(tmp_path: Path, machine: str, no_power: set[int]) -> tuple[RealNvml, FakeNvml]:
    fake = FakeNvml.from_machine(machine)
    library = TelemetryStandin(fake, no_power)
    library.write_sysfs(tmp_path)
    return RealNvml(tmp_path, library=library), fake


def test_real_translates_units(tmp_path: Path) -> None:
    real, fake = _real(tmp_path, "workstation-4gpu", no_power=set())
    gpu = fake.gpus()[1]
    assert real.telemetry(1) == GpuTelemetry(1, gpu.memory_mib, 1536, 42.0, 57.0, 301.25)


def test_real_reports_unsupported_power_as_none(tmp_path: Path) -> None:
    real, _ = _real(tmp_path, "workstation-4gpu", no_power={2})
    assert (real.telemetry(2).power_w, real.telemetry(3).power_w) == (None, 301.25)


class MemoryOnlyStandin(NvmlStandin):
    """No utilisation/temperature/power functions at all, like an nvidia-ml-py older than them."""

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(total=self._gpus[handle].memory_mib * MIB, used=0)


def test_real_without_telemetry_functions_reports_none_rather_than_failing(tmp_path: Path) -> None:
    library = MemoryOnlyStandin(FakeNvml.from_machine("single-gpu"))
    library.write_sysfs(tmp_path)
    reading = RealNvml(tmp_path, library=library).telemetry(0)
    assert (reading.memory_used_mib, reading.utilisation_percent, reading.temperature_c, reading.power_w) == (
        0,
        None,
        None,
        None,
    )
