"""HealthWatcher: watches every physical GPU and hands each typed HealthTransition to its listeners.

Boundary: the threads and the fan-out. Decisions are the pure HealthStateMachine's
(device_plugin/health/state.py); faults come from a HealthSource (FakeNvml or RealNvml, see
device_plugin/nvml/health_types.py). Listeners are the one way out: the daemon routes each
transition to its ResourceManagers and then to the metrics, the DRA front-end republishes its
slices. The watcher knows nothing of resources. Transitions are decided under the watcher's lock and
delivered by a
TransitionDispatcher (health/dispatch.py) on its own thread, in the order decided, never under the
lock:
a slow listener delays later deliveries only, never a probe, an event or a rescan. Two daemon
threads:
- the event thread keeps one NVML event watch open and feeds each event to the machine the moment it
  arrives, so a transition reaches the listeners (and ListAndWatch) without waiting for a probe
  round;
- the probe thread probes every GPU each `probe_interval_s`, and at once after a recovery hint.
A rescan may hand a new GPU list (set_gpus): new GPUs start Healthy and are watched from then on
(the event watch is reopened over the new list), GPUs that are gone are forgotten.
Fail closed: if the event set cannot be created, a GPU cannot be registered or a wait fails, the
GPUs it should cover go Unhealthy with that reason and the watch is reopened with exponential
backoff. Any exception from a backend is logged and treated as a failure; it never ends a thread.
The clock is injected (time.monotonic by default); only the machine reads its values.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from device_plugin.config.health import HealthConfig
from device_plugin.core.backoff import Backoff
from device_plugin.core.devices import Health
from device_plugin.core.errors import NvmlError
from device_plugin.health.dispatch import TransitionDispatcher
from device_plugin.health.state import GpuHealthState, HealthStateMachine, HealthTransition
from device_plugin.nvml.health_types import EventWatch, HealthEventKind, HealthSource, ProbeResult

log = logging.getLogger(__name__)

TransitionListener = Callable[[HealthTransition], object]  # what a listener returns is ignored
# how long replay() waits for its delivery (a hung listener must not hold a rescan)
REPLAY_WAIT_S = 5.0


class HealthWatcher:
    def __init__(
        self,
        source: HealthSource,
        gpu_indices: Iterable[int],
        config: HealthConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        listeners: Sequence[TransitionListener] = (),
    ) -> None:
        self._source = source
        self._indices = tuple(sorted(set(gpu_indices)))
        self._config = config
        self._clock = clock
        self._lock = threading.RLock()  # guards the machine, the GPU list and the listeners
        self._machine = HealthStateMachine(self._indices, config)
        self._listeners = list(listeners)
        self._dispatcher = TransitionDispatcher()
        self._stop = threading.Event()
        self._probe_wake = threading.Event()
        # the event thread reopens its watch over the new list
        self._gpus_changed = threading.Event()
        self._threads: list[threading.Thread] = []

    # ---- public --------------------------------------------------------------------------------

    @property
    def config(self) -> HealthConfig:
        return self._config

    def states(self) -> Mapping[int, GpuHealthState]:
        with self._lock:
            return self._machine.states()

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        with self._lock:
            return self._indices

    def replay(self, listener: TransitionListener) -> None:
        """Tell `listener` of a transition to the current state of every GPU that is not Healthy,
        and wait.

        For listeners that start all Healthy after the watcher did (ResourceManagers a rebuild
        made). Queued under the lock, so no transition slips between the replay and the next one the
        listener is told of; waits (up to REPLAY_WAIT_S) until delivered, so the caller serves them
        at the current health.
        """
        with self._lock:
            now_s = self._clock()
            replayed = [
                HealthTransition(
                    index,
                    Health.HEALTHY,
                    state.health,
                    state.reason,
                    now_s,
                    state.xid,
                    state.cause,
                    state.recovery_action,
                )
                for index, state in self._machine.states().items()
                if state.health is not Health.HEALTHY
            ]
            if not replayed:
                return
            self._dispatcher.put(lambda: _deliver((listener,), replayed))
        if not self._dispatcher.wait_delivered(REPLAY_WAIT_S):
            log.warning(
                "health: a replay was not delivered within %.1f s (a listener is slow)",
                REPLAY_WAIT_S,
            )

    def wait_delivered(self, timeout_s: float) -> bool:
        """True once every transition decided before this call has reached the listeners."""
        return self._dispatcher.wait_delivered(timeout_s)

    def set_gpus(self, gpu_indices: Iterable[int]) -> None:
        """Watch these GPUs from now on (a rescan found a different list). Kept GPUs keep their
        state."""
        indices = tuple(sorted(set(gpu_indices)))
        with self._lock:
            if indices == self._indices:
                return
            log.info(
                "health: GPUs now %s (were %s)",
                ",".join(map(str, indices)) or "none",
                ",".join(map(str, self._indices)) or "none",
            )
            self._indices = indices
            self._machine.set_indices(indices)
            self._gpus_changed.set()
        self.probe_now()

    def probe_now(self) -> None:
        self._probe_wake.set()

    def start(self) -> None:
        if not self._config.enabled:
            log.warning(
                "health checks are disabled (DP_DISABLE_HEALTHCHECKS=all or health.enabled: false)"
            )
            return
        log.info(
            "watching the health of GPUs %s: %s",
            ",".join(map(str, self.gpu_indices)) or "none",
            self._config.describe(),
        )
        for target, name in (
            (self._event_loop, "health-events"),
            (self._probe_loop, "health-probes"),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop both threads; bounded by `timeout_s` (an event wait lasts at most
        `event_wait_s`)."""
        self._stop.set()
        self._probe_wake.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]
        if self._threads:
            log.warning(
                "health threads still running after %.1f s: %s",
                timeout_s,
                [t.name for t in self._threads],
            )
        self._dispatcher.stop(max(0.0, deadline - time.monotonic()))

    # ---- fan-out -------------------------------------------------------------------------------

    def _apply(self, transitions: Iterable[HealthTransition | None]) -> None:
        """Queued under the lock, so two threads' transitions for one GPU reach every listener in
        order; delivered on the dispatch thread, outside the lock."""
        with self._lock:
            decided = [t for t in transitions if t is not None]
            if decided:
                listeners = tuple(self._listeners)
                self._dispatcher.put(lambda: _deliver(listeners, decided))

    # ---- event thread --------------------------------------------------------------------------

    def _event_loop(self) -> None:
        watch: EventWatch | None = None
        retry = Backoff(
            initial_s=self._config.retry_initial_s, max_s=self._config.retry_max_s
        ).delays_s()
        reopen_at: float | None = None  # reopen to retry GPUs whose registration failed
        while not self._stop.is_set():
            if self._gpus_changed.is_set():
                self._gpus_changed.clear()
                _close_quietly(watch)
                watch, reopen_at = None, None
            if not self.gpu_indices:  # nothing to watch until a rescan finds GPUs
                self._stop.wait(self._config.event_wait_s)
                continue
            if watch is None or (reopen_at is not None and time.monotonic() >= reopen_at):
                opened = self._open_watch()
                if opened is None:
                    self._stop.wait(next(retry))
                    continue
                _close_quietly(watch)
                watch = opened
                reopen_at = time.monotonic() + next(retry) if opened.registration_failures else None
            try:
                event = watch.wait(self._config.event_wait_s)
            except Exception as exc:  # NVML stopped answering: fail closed and start over
                self._log_failure("event wait", exc)
                self._watch_failed(self.gpu_indices, f"event wait failed: {exc}")
                _close_quietly(watch)
                watch = None
                self._stop.wait(next(retry))
                continue
            if reopen_at is None:
                retry.reset()
            if event is not None:
                with self._lock:
                    self._apply([self._machine.on_event(event, self._clock())])
                if event.kind is HealthEventKind.RECOVERED:
                    self.probe_now()
        _close_quietly(watch)

    def _open_watch(self) -> EventWatch | None:
        indices = self.gpu_indices
        try:
            watch = self._source.open_event_watch(indices)
        except Exception as exc:
            self._log_failure("event set creation", exc)
            self._watch_failed(indices, f"event set cannot be created: {exc}")
            return None
        failures = watch.registration_failures
        with self._lock:
            self._machine.on_watch_restored(i for i in indices if i not in failures)
            for index in sorted(failures):
                self._apply(self._machine.on_watch_failed([index], failures[index], self._clock()))
        return watch

    def _watch_failed(self, indices: Sequence[int], reason: str) -> None:
        with self._lock:
            self._apply(self._machine.on_watch_failed(indices, reason, self._clock()))

    @staticmethod
    def _log_failure(what: str, exc: Exception) -> None:
        if isinstance(exc, NvmlError):
            log.warning(
                "%s failed: %s; every watched GPU is Unhealthy until it works again", what, exc
            )
        else:
            log.exception(
                "%s raised unexpectedly; every watched GPU is Unhealthy until it works again", what
            )

    # ---- probe thread --------------------------------------------------------------------------

    def _probe_loop(self) -> None:
        while not self._stop.is_set():
            for index in self.gpu_indices:
                if self._stop.is_set():
                    return
                result = self._probe(index)
                with self._lock:
                    self._apply([self._machine.on_probe(result, self._clock())])
            self._probe_wake.wait(self._config.probe_interval_s)
            self._probe_wake.clear()

    def _probe(self, index: int) -> ProbeResult:
        try:
            return self._source.probe(index)
        except NvmlError as exc:
            return ProbeResult(index, False, str(exc))
        except Exception as exc:
            log.exception("probe of GPU %d raised unexpectedly", index)
            return ProbeResult(index, False, f"probe raised {type(exc).__name__}: {exc}")


def _deliver(
    listeners: Sequence[TransitionListener], transitions: Sequence[HealthTransition]
) -> None:
    for transition in transitions:
        for listener in listeners:
            _tell(listener, transition)


def _tell(listener: TransitionListener, transition: HealthTransition) -> None:
    try:
        listener(transition)
    except Exception:  # a broken listener must not stop the fan-out or the health threads
        log.exception("health transition listener failed for GPU %d", transition.gpu_index)


def _close_quietly(watch: EventWatch | None) -> None:
    if watch is None:
        return
    try:
        watch.close()
    except Exception:  # closing a watch on a failing driver: nothing more to do
        log.warning("closing the NVML event watch failed", exc_info=True)
