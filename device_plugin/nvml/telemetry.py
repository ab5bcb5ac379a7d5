"""GPU telemetry values read at scrape time: what the /metrics GPU gauges show.

Boundary: this module only defines the value type and the protocol a backend implements. The NVML
backends (device_plugin/nvml/) produce the values; device_plugin/observability/metrics.py turns them
into gauges. A field is None when the GPU or driver cannot report it (NVML_ERROR_NOT_SUPPORTED, e.g.
power on some PCIe boards), so "unknown" never masquerades as zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class GpuTelemetry:
    """One GPU's live readings at one instant. `index` is the NVML index."""

    index: int
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    utilisation_percent: float | None = None  # SM busy share over NVML's last sample period, 0-100
    temperature_c: float | None = None  # GPU core temperature
    power_w: float | None = None  # board power draw

    def __post_init__(self) -> None:
        # A backend bug (negative memory, 130 % busy) must surface here, not as a plausible gauge.
        for name in ("memory_total_mib", "memory_used_mib", "power_w"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"GpuTelemetry.{name} must be >= 0, got {value}")
        if self.utilisation_percent is not None and not 0 <= self.utilisation_percent <= 100:
            raise ValueError(
                "GpuTelemetry.utilisation_percent must be within 0-100, got "
                f"{self.utilisation_percent}"
            )


@runtime_checkable
class TelemetrySource(Protocol):
    def telemetry(self, index: int) -> GpuTelemetry:
        """Live readings of GPU `index`; raises device_plugin.core.errors.NvmlError when the GPU
        cannot be read."""
        ...
