"""The pynvml-shaped stand-in (tests/nvml/nvml_standin.py) plus NVML's event-set and probe functions.

Test harness: answers in NVML's own forms (an event data struct with a device handle, eventType bits
and the Xid in eventData; TIMEOUT as an error; field values with a per-field return code) so RealNvml's
health side (device_plugin/nvml/real/health.py) runs without a GPU. Per-GPU fault state is plain
attributes the tests set. NVML codes and event bits are nvml.h's.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass, field
from types import SimpleNamespace

from tests.nvml.nvml_standin import NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_SUPPORTED, NVMLError, NvmlStandin

NVML_SUCCESS = 0
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
SINGLE_BIT_ECC = 0x1
DOUBLE_BIT_ECC = 0x2
XID_CRITICAL = 0x8
ALL_EVENTS = SINGLE_BIT_ECC | DOUBLE_BIT_ECC | XID_CRITICAL
NO_INSTANCE = 0xFFFFFFFF


@dataclass
class GpuFaults:
    supported_events: int = ALL_EVENTS
    register_error: int | None = None
    lost: bool = False
    retired_pages_pending: int | None = 0  # None: NOT_SUPPORTED (A100 and later)
    remapped_rows: tuple[int, int, int, int] | None = (0, 0, 0, 0)  # None: NOT_SUPPORTED (before A100)
    recovery_action: int | None = None  # None: the field answers NOT_SUPPORTED (drivers before 565)


@dataclass
class EventSet:
    registered: dict[int, int] = field(default_factory=dict)  # handle -> mask
    events: queue.Queue[SimpleNamespace] = field(default_factory=queue.Queue)
    freed: bool = False


class HealthStandin(NvmlStandin):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.faults = [GpuFaults() for _ in self._gpus]
        self.sets: list[EventSet] = []
        self.create_error: int | None = None
        self.wait_error: int | None = None

    # ---- what tests call -----------------------------------------------------------------------

    def emit(self, index: int, event_type: int, data: int = 0, gi: int = NO_INSTANCE, ci: int = NO_INSTANCE) -> None:
        """Raise an event on GPU `index` into every set that registered that type for it (as the driver does)."""
        for event_set in self.sets:
            if not event_set.freed and event_set.registered.get(index, 0) & event_type:
                event_set.events.put(
                    SimpleNamespace(
                        device=index, eventType=event_type, eventData=data, gpuInstanceId=gi, computeInstanceId=ci
                    )
                )

    # ---- NVML functions ------------------------------------------------------------------------

    def nvmlEventSetCreate(self) -> EventSet:
        if self.create_error is not None:
            raise NVMLError(self.create_error)
        self.sets.append(EventSet())
        return self.sets[-1]

    def nvmlDeviceGetSupportedEventTypes(self, handle: int) -> int:
        return self.faults[handle].supported_events

    def nvmlDeviceRegisterEvents(self, handle: int, mask: int, event_set: EventSet) -> None:
        if self.faults[handle].register_error is not None:
            raise NVMLError(self.faults[handle].register_error)  # type: ignore[arg-type]
        if mask & ~self.faults[handle].supported_events:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        event_set.registered[handle] = event_set.registered.get(handle, 0) | mask

    def nvmlEventSetWait_v2(self, event_set: EventSet, timeout_ms: int) -> SimpleNamespace:
        if self.wait_error is not None:
            raise NVMLError(self.wait_error)
        try:
            return event_set.events.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            raise NVMLError(NVML_ERROR_TIMEOUT) from None

    def nvmlEventSetFree(self, event_set: EventSet) -> None:
        event_set.freed = True

    def nvmlDeviceGetHandleByUUID(self, uuid: bytes) -> int:
        for gpu in self._gpus:
            if gpu.uuid.encode() == uuid:
                if self.faults[gpu.index].lost:
                    raise NVMLError(NVML_ERROR_GPU_IS_LOST)
                return gpu.index
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        if self.faults[handle].lost:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        return super().nvmlDeviceGetMemoryInfo(handle)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: int) -> int:
        value = self.faults[handle].retired_pages_pending
        if value is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return value

    def nvmlDeviceGetRemappedRows(self, handle: int) -> tuple[int, int, int, int]:
        value = self.faults[handle].remapped_rows
        if value is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return value

    def nvmlDeviceGetFieldValues(self, handle: int, field_ids: list[int]) -> list[SimpleNamespace]:
        action = self.faults[handle].recovery_action
        return [
            SimpleNamespace(
                fieldId=field_id,
                nvmlReturn=NVML_ERROR_NOT_SUPPORTED if action is None or field_id != 230 else NVML_SUCCESS,
                valueType=1,  # NVML_VALUE_TYPE_UNSIGNED_INT
                value=SimpleNamespace(uiVal=action or 0),
            )
            for field_id in field_ids
        ]
