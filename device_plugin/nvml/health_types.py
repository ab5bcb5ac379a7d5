"""Frozen values and protocols of the NVML health side: fault events, probe results, event watches.

Boundary: what an NVML backend reports about a GPU's health, nothing about policy. Whether an Xid is
critical, how long a GPU must stay quiet before it counts as recovered, and who is told are decided
in device_plugin/health*.py. Both backends (fake_faults.py behind FakeNvml, real_health.py behind
RealNvml) produce these values; no handle or pynvml object ever leaves the backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from device_plugin.nvml.recovery_action import recovery_action_name

NVML_ERROR_GPU_IS_LOST = 15  # nvmlReturn_t: the GPU is lost or has fallen off the bus


class HealthEventKind(StrEnum):
    XID = "xid"  # nvmlEventTypeXidCriticalError; `xid` carries the code
    DOUBLE_BIT_ECC = "double_bit_ecc"  # nvmlEventTypeDoubleBitEccError (uncorrectable memory error)
    LOST = "lost"  # the GPU is lost or has fallen off the bus (NVML_ERROR_GPU_IS_LOST)
    # the fault source says the GPU is back: a hint to probe now, never health by itself
    RECOVERED = "recovered"


@dataclass(frozen=True)
class HealthEvent:
    """One fault (or recovery hint) reported for physical GPU `gpu_index` (NVML index).

    `recovery_action` is what the driver asked for when an Xid arrived (recovery_action.py's
    values); None where the driver does not say (before 565, a lost GPU) or the event is not an
    Xid."""

    gpu_index: int
    kind: HealthEventKind
    xid: int | None = None
    detail: str = ""
    recovery_action: int | None = None

    def __post_init__(self) -> None:
        if (self.kind is HealthEventKind.XID) != (self.xid is not None):
            raise ValueError(
                f"HealthEvent: an Xid code goes with kind 'xid' and only with it ({self!r})"
            )
        if self.xid is not None and self.xid < 0:
            raise ValueError(f"HealthEvent: Xid must be >= 0, got {self.xid}")
        if self.recovery_action is not None and self.xid is None:
            raise ValueError(
                f"HealthEvent: a recovery action goes with an Xid event only ({self!r})"
            )

    def describe(self) -> str:
        """Human text used as the device's health reason; keeps "Xid N" literal for the metrics
        classifier."""
        base = f"Xid {self.xid}" if self.kind is HealthEventKind.XID else _KIND_TEXT[self.kind]
        base = f"{base} ({self.detail})" if self.detail else base
        if self.recovery_action is None:
            return base
        return (
            f"{base}; driver asks for recovery action {recovery_action_name(self.recovery_action)}"
        )


_KIND_TEXT = {
    HealthEventKind.DOUBLE_BIT_ECC: "double-bit ECC error",
    HealthEventKind.LOST: "GPU lost or fallen off the bus",
    HealthEventKind.RECOVERED: "fault source reports recovery",
}


@dataclass(frozen=True)
class ProbeResult:
    """The outcome of probing one GPU: `ok`, or the first thing that failed in `reason`."""

    gpu_index: int
    ok: bool
    reason: str = ""
    # NVML said the GPU is lost (NVML_ERROR_GPU_IS_LOST): the same fault an event calls "lost"
    lost: bool = False
    # what the driver reported in this probe; None: not read or not supported
    recovery_action: int | None = None

    def __post_init__(self) -> None:
        if not self.ok and not self.reason:
            raise ValueError(f"ProbeResult for GPU {self.gpu_index}: a failed probe must say why")


def frozen_failures(values: Mapping[int, str] | None = None) -> Mapping[int, str]:
    """A read-only copy of per-GPU registration failures (for EventWatch implementations)."""
    return MappingProxyType(dict(values or {}))


class EventWatch(Protocol):
    """An open NVML event set over some GPUs. Not shared between threads: one reader waits on it."""

    @property
    def registration_failures(self) -> Mapping[int, str]:
        """GPUs whose events could not be registered, with the reason; they are not watched."""
        ...

    def wait(self, timeout_s: float) -> HealthEvent | None:
        """The next event, or None when `timeout_s` passes quietly. Raises NvmlError when NVML
        fails."""
        ...

    def close(self) -> None:
        """Free the event set. Idempotent; a wait after close raises NvmlError."""
        ...


@runtime_checkable
class HealthSource(Protocol):
    """The health side of an NVML backend (FakeNvml and RealNvml both implement it)."""

    def open_event_watch(self, indices: tuple[int, ...]) -> EventWatch:
        """An event set watching Xid critical errors and double-bit ECC errors on GPUs `indices`.

        Raises NvmlError when the event set itself cannot be created; a GPU whose registration alone
        fails is named in the watch's `registration_failures` instead.
        """
        ...

    def probe(self, index: int) -> ProbeResult:
        """Whether GPU `index` still answers and reports no pending memory repair or recovery
        action.

        Never raises for a GPU-side failure: that is a failed ProbeResult naming the call and NVML's
        reason.
        """
        ...
