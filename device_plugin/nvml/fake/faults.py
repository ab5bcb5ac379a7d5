"""FakeFaults: the injected fault state of a fake machine, and the event watches FakeNvml hands out.

Boundary: this is FakeNvml's health side (device_plugin/nvml/health_types.HealthSource), plus an
in-process injection API, reached as `FakeNvml.test_hooks` (named so: it is no part of NvmlBackend),
for tests, the demo and device_plugin/health/fake_events.py (faults from outside the process). It
models what NVML would report, not policy: every Xid is delivered, ignored or not.

Faults that real hardware keeps until repaired stay until recover():
- Xid 79 (fallen off the bus) and set_lost() make the GPU lost: probes fail with GPU_IS_LOST;
- a double-bit ECC error leaves page retirement pending, as on real GPUs until a reset;
- set_probe_failure() makes probes fail with any reason (remapped rows failed, a timeout...);
- the driver's recovery action (recovery_action.py), where the machine's driver has it (565+):
  stated with set_recovery_action() or with an Xid event, it stays until recover() or another is
  stated. Probes report it (one that takes the GPU out fails them) and each Xid event carries the
  action current when it arrives, as the real backend reads it then. On an older driver there is
  none, and stating one is refused.
Other Xids are one-off events. Events for GPUs no open watch covers wait in a bounded backlog,
handed to the next watch that covers them, so a fault injected just before the watcher starts is not
lost. Thread-safe: one Condition guards everything; a watch's wait() wakes as soon as an event is
delivered.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from device_plugin.core.errors import NvmlError
from device_plugin.nvml.health_types import (
    HealthEvent,
    HealthEventKind,
    ProbeResult,
    frozen_failures,
)
from device_plugin.nvml.recovery_action import RecoveryAction, recovery_action_name, takes_gpu_out

# NVML return codes (nvmlReturn_t), so callers see the same `code` as with the real library.
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_UNKNOWN = 999

XID_FALLEN_OFF_BUS = 79
BACKLOG_LIMIT = 1024  # events waiting for a watch; the oldest are dropped beyond this


@dataclass
class _FaultState:
    """Sticky faults of one GPU; read and written under FakeFaults._cond."""

    lost: bool = False
    retired_pages_pending: bool = False
    probe_failure: str | None = None
    recovery_action: int | None = None  # None: the driver has no such field


class FakeEventWatch:
    """An EventWatch over a FakeFaults; created by FakeFaults.open_watch."""

    def __init__(
        self, faults: FakeFaults, indices: frozenset[int], failures: Mapping[int, str]
    ) -> None:
        self._faults = faults
        self.indices = indices
        self._failures = frozen_failures(failures)
        self._queue: deque[HealthEvent] = deque()
        self._closed = False

    @property
    def registration_failures(self) -> Mapping[int, str]:
        return self._failures

    def wait(self, timeout_s: float) -> HealthEvent | None:
        cond = self._faults._cond
        with cond:
            cond.wait_for(
                lambda: self._closed or bool(self._queue) or self._faults._wait_failure is not None,
                timeout_s,
            )
            if self._closed:
                raise NvmlError(
                    "nvmlEventSetWait_v2", "the event set is freed", code=NVML_ERROR_UNINITIALIZED
                )
            if self._faults._wait_failure is not None:
                raise NvmlError(
                    "nvmlEventSetWait_v2", self._faults._wait_failure, code=NVML_ERROR_UNKNOWN
                )
            return self._queue.popleft() if self._queue else None

    def close(self) -> None:
        with self._faults._cond:
            if self._closed:
                return
            self._closed = True
            self._faults._watches.remove(self)
            self._faults._cond.notify_all()

    def _deliver(self, event: HealthEvent) -> None:  # caller holds the condition
        self._queue.append(event)


class FakeFaults:
    def __init__(self, gpu_count: int, *, recovery_action_supported: bool = False) -> None:
        self._cond = threading.Condition()
        self._recovery_supported = recovery_action_supported
        self._gpus = [_FaultState(recovery_action=self._no_action()) for _ in range(gpu_count)]
        self._watches: list[FakeEventWatch] = []
        self._backlog: deque[HealthEvent] = deque(maxlen=BACKLOG_LIMIT)
        self._create_failure: str | None = None
        self._wait_failure: str | None = None
        self._registration_failures: dict[int, str] = {}

    # ---- injection API -------------------------------------------------------------------------

    def inject(self, event: HealthEvent) -> None:
        """Deliver `event` as NVML would, with the sticky side effects real hardware has. An Xid
        event's recovery action becomes the GPU's; one without takes the GPU's current action (none
        once lost)."""
        with self._cond:
            state = self._gpu(event.gpu_index)
            if event.recovery_action is not None:
                self._check_supported(event.gpu_index)
                state.recovery_action = event.recovery_action
            if event.kind is HealthEventKind.LOST or event.xid == XID_FALLEN_OFF_BUS:
                state.lost = True
            elif event.kind is HealthEventKind.DOUBLE_BIT_ECC:
                state.retired_pages_pending = True
            elif event.kind is HealthEventKind.RECOVERED:
                self._clear(state)
            if (
                event.kind is HealthEventKind.XID
                and event.recovery_action is None
                and not state.lost
            ):
                event = replace(event, recovery_action=state.recovery_action)
            self._deliver(event)

    def set_lost(self, index: int, detail: str = "") -> None:
        self.inject(HealthEvent(index, HealthEventKind.LOST, detail=detail))

    def recover(self, index: int, detail: str = "") -> None:
        """Clear every sticky fault of GPU `index` and tell the watches (probes pass from now
        on)."""
        self.inject(HealthEvent(index, HealthEventKind.RECOVERED, detail=detail))

    def set_recovery_action(self, index: int, action: int) -> None:
        """Make the driver report `action` for GPU `index` (no event, as when a fault came and went
        unseen). Raises NvmlError (NOT_SUPPORTED) where the machine's driver is older than 565."""
        with self._cond:
            state = self._gpu(index)
            self._check_supported(index)
            state.recovery_action = action

    def set_probe_failure(self, index: int, reason: str | None) -> None:
        """Make probes of GPU `index` fail with `reason` (None: pass again) without any event."""
        with self._cond:
            self._gpu(index).probe_failure = reason

    def fail_event_set_creation(self, reason: str | None) -> None:
        """Make open_watch raise (None: succeed again); models nvmlEventSetCreate failing."""
        with self._cond:
            self._create_failure = reason

    def fail_event_wait(self, reason: str | None) -> None:
        """Make every wait on every watch raise (None: answer again); models NVML no longer
        answering."""
        with self._cond:
            self._wait_failure = reason
            self._cond.notify_all()

    def fail_registration(self, index: int, reason: str | None) -> None:
        """Make event registration of GPU `index` fail in watches opened from now on (None:
        succeed)."""
        with self._cond:
            self._gpu(index)
            if reason is None:
                self._registration_failures.pop(index, None)
            else:
                self._registration_failures[index] = reason

    # ---- backend side --------------------------------------------------------------------------

    def open_watch(self, indices: Iterable[int]) -> FakeEventWatch:
        with self._cond:
            wanted = frozenset(indices)
            for index in wanted:
                self._gpu(index)
            if self._create_failure is not None:
                raise NvmlError("nvmlEventSetCreate", self._create_failure, code=NVML_ERROR_UNKNOWN)
            failures = {
                i: f"nvmlDeviceRegisterEvents failed: {r}"
                for i, r in self._registration_failures.items()
            }
            refused = {i: failures[i] for i in wanted & failures.keys()}
            watch = FakeEventWatch(self, wanted - refused.keys(), refused)
            kept: deque[HealthEvent] = deque(maxlen=BACKLOG_LIMIT)
            for event in self._backlog:
                if event.gpu_index in watch.indices:
                    watch._deliver(event)
                else:
                    kept.append(event)
            self._backlog = kept
            self._watches.append(watch)
            self._cond.notify_all()
            return watch

    def probe(self, index: int) -> ProbeResult:
        with self._cond:
            state = self._gpu(index)
            if state.lost:
                return ProbeResult(
                    index, False, "nvmlDeviceGetHandleByUUID failed: GPU is lost", lost=True
                )
            action = state.recovery_action
            if action is not None and takes_gpu_out(action):
                reason = f"driver asks for recovery action {recovery_action_name(action)}"
                return ProbeResult(index, False, reason, recovery_action=action)
            if state.retired_pages_pending:
                reason = "retired pages pending (nvmlDeviceGetRetiredPagesPendingStatus)"
                return ProbeResult(index, False, reason, recovery_action=action)
            if state.probe_failure is not None:
                return ProbeResult(index, False, state.probe_failure, recovery_action=action)
            return ProbeResult(index, True, recovery_action=action)

    # ---- internals -----------------------------------------------------------------------------

    def _gpu(self, index: int) -> _FaultState:
        if (
            isinstance(index, bool)
            or not isinstance(index, int)
            or not 0 <= index < len(self._gpus)
        ):
            raise NvmlError(
                "fake fault injection",
                f"no GPU with index {index!r}; this machine has {len(self._gpus)}",
                device=f"GPU {index!r}",
                code=NVML_ERROR_INVALID_ARGUMENT,
            )
        return self._gpus[index]

    def _no_action(self) -> int | None:
        return RecoveryAction.NONE if self._recovery_supported else None

    def _check_supported(self, index: int) -> None:
        if not self._recovery_supported:
            raise NvmlError(
                "fake fault injection",
                "this machine's driver reports no recovery action (drivers 565 and later do)",
                device=f"GPU {index}",
                code=NVML_ERROR_NOT_SUPPORTED,
            )

    def _clear(self, state: _FaultState) -> None:
        state.lost = False
        state.retired_pages_pending = False
        state.probe_failure = None
        state.recovery_action = self._no_action()

    def _deliver(self, event: HealthEvent) -> None:  # caller holds the condition
        watching = [w for w in self._watches if event.gpu_index in w.indices]
        for watch in watching:
            watch._deliver(event)
        if not watching:
            self._backlog.append(event)
        self._cond.notify_all()
