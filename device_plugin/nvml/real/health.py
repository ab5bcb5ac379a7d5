"""RealHealth: the health side of RealNvml (NVML event sets and probes) over RealNvml's choke point.

Boundary: this module never imports pynvml. RealNvml passes its `_call(function, *args,
device=...)`, which resolves the pynvml function, calls it and turns pynvml errors into NvmlError
with NVML's code; everything here is in terms of those NvmlErrors and NVML's C ABI values below.
What is critical is not decided here: every Xid is reported (device_plugin/config/health.py ignores
application Xids).

Events: one event set; each GPU registers Xid critical errors and double-bit ECC errors, masked by
what it supports (single-bit ECC is never registered: it is corrected). An event names its GPU by
the handle registered for it, not by asking NVML: a GPU that fell off the bus answers GPU_IS_LOST to
every call, its UUID query included, and its own Xid 79 must still reach the watcher as that GPU's
event. Probes: the handle by UUID still resolves, memory info answers, no retired pages pending, no
remapped rows pending or failed, and the driver's recovery action
(NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, drivers 565+) does not take the GPU out (recovery_action.py).
The action is also read when an Xid arrives, so the event says what the driver asked for. A driver
without the field (NOT_SUPPORTED) gives no information: logged once per GPU, never a failure.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from device_plugin.core.errors import NvmlError
from device_plugin.nvml.health_types import (
    NVML_ERROR_GPU_IS_LOST,
    HealthEvent,
    HealthEventKind,
    ProbeResult,
    frozen_failures,
)
from device_plugin.nvml.recovery_action import (
    FI_DEV_GET_GPU_RECOVERY_ACTION,
    recovery_action_name,
    takes_gpu_out,
)

log = logging.getLogger(__name__)

NvmlCall = Callable[..., Any]  # RealNvml._call: (function, *args, device=...) -> pynvml's result

# NVML C ABI values (nvml.h); pynvml only names them.
NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_FUNCTION_NOT_FOUND = 13
EVENT_DOUBLE_BIT_ECC = 0x2  # nvmlEventTypeDoubleBitEccError
EVENT_XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
WATCHED_EVENTS = EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC
NVML_FEATURE_ENABLED = 1
NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId of an event that is not MIG-scoped
# nvmlValueType_t -> the c_nvmlValue_t union member holding the value.
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
_UNSUPPORTED = frozenset({NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND})


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def handle_key(handle: Any) -> Hashable:
    """Equal for every handle of one GPU: pynvml makes a new ctypes pointer object per call, so its
    handles are compared by the address they hold; a stand-in's plain handles (tests) compare as
    themselves."""
    if isinstance(handle, ctypes._Pointer):
        return ("address", ctypes.cast(handle, ctypes.c_void_p).value)
    return handle


class RealEventWatch:
    """An NVML event set over some GPUs (the EventWatch protocol). One thread waits on it."""

    def __init__(
        self,
        call: NvmlCall,
        event_set: Any,
        by_uuid: Mapping[str, int],
        failures: Mapping[int, str],
        by_handle: Mapping[Hashable, int] | None = None,
    ):
        self._call = call
        self._set = event_set
        self._by_uuid = dict(by_uuid)
        # handle_key of each registered GPU's handle -> index
        self._by_handle = dict(by_handle or {})
        self._failures = frozen_failures(failures)
        self._closed = False

    @classmethod
    def open(cls, call: NvmlCall, indices: Iterable[int]) -> RealEventWatch:
        # an NvmlError here is the caller's "cannot watch at all"
        event_set = call("nvmlEventSetCreate")
        by_uuid: dict[str, int] = {}
        by_handle: dict[Hashable, int] = {}
        failures: dict[int, str] = {}
        for index in sorted(set(indices)):
            where = f"GPU {index}"
            try:
                handle = call("nvmlDeviceGetHandleByIndex", index, device=where)
                uuid = _text(call("nvmlDeviceGetUUID", handle, device=where))
                mask = WATCHED_EVENTS & int(
                    call("nvmlDeviceGetSupportedEventTypes", handle, device=where)
                )
                if not mask:
                    log.warning(
                        "%s supports neither Xid nor double-bit ECC events; only probes watch it",
                        where,
                    )
                    continue
                call("nvmlDeviceRegisterEvents", handle, mask, event_set, device=where)
            except NvmlError as exc:
                if exc.code in _UNSUPPORTED:
                    log.warning(
                        "%s: %s; the driver is too old for events, only probes watch it", where, exc
                    )
                    continue
                failures[index] = str(exc)
                continue
            by_uuid[uuid] = index
            by_handle[handle_key(handle)] = index
        return cls(call, event_set, by_uuid, failures, by_handle)

    @property
    def registration_failures(self) -> Mapping[int, str]:
        return self._failures

    def wait(self, timeout_s: float) -> HealthEvent | None:
        if self._closed:
            raise NvmlError("nvmlEventSetWait_v2", "the event set is freed")
        try:
            data = self._call("nvmlEventSetWait_v2", self._set, max(1, int(timeout_s * 1000)))
        except NvmlError as exc:
            if exc.code == NVML_ERROR_TIMEOUT:
                return None
            raise
        index = self._by_handle.get(handle_key(data.device))
        if index is None:
            # A handle we did not register (a driver that hands out another one): name it by its
            # UUID. An event whose source cannot be named is a watch failure (NvmlError from the
            # UUID call); one from a GPU this watch did not register cannot concern our devices and
            # is logged and dropped.
            uuid = _text(self._call("nvmlDeviceGetUUID", data.device, device="event source"))
            index = self._by_uuid.get(uuid)
            if index is None:
                log.warning(
                    "NVML event 0x%x from %s, a GPU this watch did not register; ignored",
                    data.eventType,
                    uuid,
                )
                return None
        detail = _instance_detail(data)
        if data.eventType & EVENT_XID_CRITICAL:
            action = self._action_after_xid(data.device, index)
            return HealthEvent(
                index,
                HealthEventKind.XID,
                xid=int(data.eventData),
                detail=detail,
                recovery_action=action,
            )
        if data.eventType & EVENT_DOUBLE_BIT_ECC:
            return HealthEvent(index, HealthEventKind.DOUBLE_BIT_ECC, detail=detail)
        log.debug("GPU %d: NVML event type 0x%x not watched; ignored", index, data.eventType)
        return None

    def _action_after_xid(self, handle: Any, index: int) -> int | None:
        """What the driver asks for now; None where it cannot say (no field, or a GPU that no longer
        answers: the Xid is then judged by the Xid policy alone)."""
        try:
            return read_recovery_action(self._call, handle, f"GPU {index}")
        except NvmlError as exc:
            log.info(
                "GPU %d: recovery action unreadable after an Xid (%s); the Xid policy decides",
                index,
                exc,
            )
            return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._call("nvmlEventSetFree", self._set)
        except NvmlError as exc:  # freeing a set on a dying driver: nothing left to do but say so
            log.warning("%s", exc)


def _instance_detail(data: Any) -> str:
    gi = getattr(data, "gpuInstanceId", NO_INSTANCE)
    ci = getattr(data, "computeInstanceId", NO_INSTANCE)
    return "" if gi == NO_INSTANCE else f"MIG GPU instance {gi}, compute instance {ci}"


class RealHealth:
    """HealthSource over RealNvml's choke point. Probes use the UUID first seen at an index, so a
    GPU that disappears or is renumbered fails its probe instead of silently probing another GPU."""

    def __init__(self, call: NvmlCall) -> None:
        self._call = call
        self._uuids: dict[int, str] = {}
        # GPUs whose driver answered NOT_SUPPORTED (said once each)
        self._no_action_logged: set[int] = set()

    def open_event_watch(self, indices: tuple[int, ...]) -> RealEventWatch:
        return RealEventWatch.open(self._call, indices)

    def probe(self, index: int) -> ProbeResult:
        try:
            failure, action = self._probe(index)
        except NvmlError as exc:
            return ProbeResult(index, False, str(exc), lost=exc.code == NVML_ERROR_GPU_IS_LOST)
        return ProbeResult(index, failure is None, failure or "", recovery_action=action)

    def _probe(self, index: int) -> tuple[str | None, int | None]:
        where = f"GPU {index}"
        uuid = self._uuids.get(index)
        if uuid is None:
            handle = self._call("nvmlDeviceGetHandleByIndex", index, device=where)
            uuid = self._uuids.setdefault(
                index, _text(self._call("nvmlDeviceGetUUID", handle, device=where))
            )
        handle = self._call("nvmlDeviceGetHandleByUUID", uuid.encode(), device=where)
        self._call("nvmlDeviceGetMemoryInfo", handle, device=where)
        # The driver's verdict first: a failed probe then says which recovery the driver wants.
        action = read_recovery_action(self._call, handle, where)
        if action is None and index not in self._no_action_logged:
            self._no_action_logged.add(index)
            log.info(
                "%s: the driver reports no recovery action (NOT_SUPPORTED; drivers 565+ do); "
                "probed without",
                where,
            )
        if action is not None and takes_gpu_out(action):
            name = recovery_action_name(action)
            return (
                f"driver asks for recovery action {name} (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)",
                action,
            )
        if (
            self._optional("nvmlDeviceGetRetiredPagesPendingStatus", handle, where)
            == NVML_FEATURE_ENABLED
        ):
            return (
                "retired pages pending (nvmlDeviceGetRetiredPagesPendingStatus); a GPU reset is "
                "needed",
                action,
            )
        rows = self._optional("nvmlDeviceGetRemappedRows", handle, where)
        if rows is not None:
            _, _, pending, failed = rows
            if failed:
                return "row remapping failed (nvmlDeviceGetRemappedRows)", action
            if pending:
                return (
                    "row remapping pending (nvmlDeviceGetRemappedRows); a GPU reset is needed",
                    action,
                )
        return None, action

    def _optional(self, function: str, handle: Any, where: str, *args: Any) -> Any:
        return _optional(self._call, function, handle, where, *args)


def _optional(call: NvmlCall, function: str, handle: Any, where: str, *args: Any) -> Any:
    """`function`'s answer, or None where the GPU or driver does not support it."""
    try:
        return call(function, handle, *args, device=where)
    except NvmlError as exc:
        if exc.code in _UNSUPPORTED:
            return None
        raise


def read_recovery_action(call: NvmlCall, handle: Any, where: str) -> int | None:
    """The GPU's recovery action (recovery_action.py's values); None where the driver lacks the
    field. Raises NvmlError for any other failure (the GPU lost, NVML gone)."""
    values = _optional(
        call, "nvmlDeviceGetFieldValues", handle, where, [FI_DEV_GET_GPU_RECOVERY_ACTION]
    )
    if values is None:
        return None
    field = values[0]
    if field.nvmlReturn in _UNSUPPORTED:
        return None
    if field.nvmlReturn != NVML_SUCCESS:
        raise NvmlError(
            "nvmlDeviceGetFieldValues",
            "GPU_RECOVERY_ACTION unreadable",
            device=where,
            code=field.nvmlReturn,
        )
    member = (
        _VALUE_MEMBERS[field.valueType] if 0 <= field.valueType < len(_VALUE_MEMBERS) else "uiVal"
    )
    return int(getattr(field.value, member))
