"""HealthStateMachine: the two-way health state of every physical GPU, pure and clock-free.

Boundary: decisions only. Inputs are NVML health values (events, probe results, watch failures) and
the time `now_s` the caller read from its injected clock; outputs are HealthTransition values that
the HealthWatcher (device_plugin/health/watcher.py) hands to its listeners. No threads, no NVML.

Rules, per GPU:
- Healthy -> Unhealthy on a critical event (an Xid the policy does not ignore, a double-bit ECC
  error, a lost GPU), on a failed probe, or when the event watch cannot cover the GPU (fail closed).
- Unhealthy -> Healthy once probes have passed for `quiet_period_s` with no critical event, and only
  while the event watch covers the GPU again. A critical event or failed probe restarts the period.
- Ignored Xids and recovery hints never change health. When the config disables health checks,
  nothing does.
- The driver's recovery action (device_plugin/nvml/recovery_action.py), where it reports one,
  decides an Xid the policy calls critical: NONE or RECOVER_IMEX_DOMAIN make it informational
  (logged, the GPU stays Healthy), any other action makes it a fault. An Xid forced critical
  (criticalXids, DP_ENABLE_HEALTHCHECKS) stays a fault whatever the action; an Xid with no action
  known is judged by the Xid policy alone. A probe that finds an action that takes the GPU out fails
  with cause RECOVERY_ACTION.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from types import MappingProxyType

from device_plugin.config.health import HealthConfig
from device_plugin.core.devices import Health
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind, ProbeResult
from device_plugin.nvml.recovery_action import recovery_action_name, takes_gpu_out

log = logging.getLogger(__name__)


class HealthCause(StrEnum):
    """What made a GPU Unhealthy (or Healthy again), typed where it is decided, so a consumer (the
    DRA driver's device taints) never parses the reason text."""

    XID = "xid"  # a critical Xid event; the transition's `xid` carries the code
    DOUBLE_BIT_ECC = "double-bit-ecc"
    LOST = "gpu-lost"  # the GPU is lost or has fallen off the bus (an event said so)
    PROBE_FAILED = "probe-failed"
    # a probe found the driver asking for a reset, reboot, drain...
    RECOVERY_ACTION = "recovery-action"
    WATCH_FAILED = "health-unwatched"  # the event watch cannot cover the GPU (fail closed)
    RECOVERED = "recovered"


_EVENT_CAUSE = {
    HealthEventKind.XID: HealthCause.XID,
    HealthEventKind.DOUBLE_BIT_ECC: HealthCause.DOUBLE_BIT_ECC,
    HealthEventKind.LOST: HealthCause.LOST,
}


@dataclass(frozen=True)
class HealthTransition:
    """GPU `gpu_index` went from `before` to `after` at `at_s` (the watcher's clock) because of
    `reason`."""

    gpu_index: int
    before: Health
    after: Health
    reason: str
    at_s: float
    # the Xid code when an Xid event caused it, typed from the event (never parsed)
    xid: int | None = None
    cause: HealthCause | None = None  # None: not said (a transition made by hand, e.g. in a test)
    # what the driver asked for, when it said (recovery_action.py's values)
    recovery_action: int | None = None

    @property
    def healthy(self) -> bool:
        """Whether the GPU is Healthy after this transition."""
        return self.after is Health.HEALTHY


@dataclass(frozen=True)
class GpuHealthState:
    health: Health = Health.HEALTHY
    reason: str = ""
    # first passing probe since the last failure, while Unhealthy
    passing_since_s: float | None = None
    # why the event watch does not cover this GPU; None when it does
    watch_failure: str | None = None
    # the latest failure seen, which may differ from the one that made it Unhealthy
    last_failure: str = ""
    # what made it Unhealthy (a replay tells it again); None while Healthy
    cause: HealthCause | None = None
    xid: int | None = None  # the Xid that made it Unhealthy, when one did
    # the driver's action with the fault that made it Unhealthy, when said
    recovery_action: int | None = None
    reported_action: int | None = None  # the latest action a probe read (to log a change once)


class HealthStateMachine:
    def __init__(self, indices: Iterable[int], config: HealthConfig) -> None:
        self._config = config
        self._states = {index: GpuHealthState() for index in sorted(set(indices))}

    @property
    def config(self) -> HealthConfig:
        return self._config

    def states(self) -> Mapping[int, GpuHealthState]:
        return MappingProxyType(dict(self._states))

    def state(self, index: int) -> GpuHealthState:
        return self._states[index]

    def set_indices(self, indices: Iterable[int]) -> None:
        """Hold these GPUs from now on (a rescan): kept ones keep their state, new ones start
        Healthy."""
        wanted = sorted(set(indices))
        self._states = {index: self._states.get(index, GpuHealthState()) for index in wanted}

    # ---- inputs --------------------------------------------------------------------------------

    def on_event(self, event: HealthEvent, now_s: float) -> HealthTransition | None:
        if not self._config.enabled or not self._known(event.gpu_index, "event"):
            return None
        if event.kind is HealthEventKind.RECOVERED:
            log.info(
                "GPU %d: %s; recovery still needs passing probes", event.gpu_index, event.describe()
            )
            return None
        if event.kind is HealthEventKind.XID and not self._config.is_critical_xid(event.xid or 0):
            log.info(
                "GPU %d: %s ignored (application-level Xid by policy)",
                event.gpu_index,
                event.describe(),
            )
            return None
        if self._informational(event):
            log.info(
                "GPU %d: %s: informational, the GPU stays in service",
                event.gpu_index,
                event.describe(),
            )
            return None
        state = replace(self._states[event.gpu_index], passing_since_s=None)
        cause = _EVENT_CAUSE[event.kind]
        return self._fail(
            event.gpu_index, state, event.describe(), now_s, cause, event.xid, event.recovery_action
        )

    def on_probe(self, result: ProbeResult, now_s: float) -> HealthTransition | None:
        if not self._config.enabled or not self._known(result.gpu_index, "probe"):
            return None
        index = result.gpu_index
        state = self._reported(index, result)
        if not result.ok:
            failed = replace(state, passing_since_s=None)
            action = result.recovery_action
            # a probe that finds the GPU lost names the same fault as the lost-GPU event (the two
            # race)
            if result.lost:
                cause = HealthCause.LOST
            elif action is not None and takes_gpu_out(action):
                cause = HealthCause.RECOVERY_ACTION
            else:
                cause = HealthCause.PROBE_FAILED
            return self._fail(
                index, failed, f"probe failed: {result.reason}", now_s, cause, None, action
            )
        if state.health is Health.HEALTHY or state.watch_failure is not None:
            return None  # nothing to recover, or not allowed to while the GPU is not watched
        passing_since = now_s if state.passing_since_s is None else state.passing_since_s
        if now_s - passing_since < self._config.quiet_period_s:
            self._states[index] = replace(state, passing_since_s=passing_since)
            return None
        reason = (
            f"recovered: probes passed for {now_s - passing_since:.1f} s with no critical event"
        )
        healthy = replace(
            state,
            health=Health.HEALTHY,
            reason=reason,
            passing_since_s=None,
            cause=None,
            xid=None,
            recovery_action=None,
        )
        self._states[index] = healthy
        log.info("GPU %d: Unhealthy -> Healthy (%s; was: %s)", index, reason, state.reason)
        return HealthTransition(
            index, Health.UNHEALTHY, Health.HEALTHY, reason, now_s, cause=HealthCause.RECOVERED
        )

    def on_watch_failed(
        self, indices: Iterable[int], reason: str, now_s: float
    ) -> list[HealthTransition]:
        """The event watch cannot cover `indices` (creation, registration or wait failed): fail
        closed."""
        if not self._config.enabled:
            return []
        transitions = []
        for index in sorted(set(indices)):
            if not self._known(index, "watch failure"):
                continue
            state = replace(self._states[index], watch_failure=reason, passing_since_s=None)
            transition = self._fail(
                index, state, f"health watch failed: {reason}", now_s, HealthCause.WATCH_FAILED
            )
            if transition is not None:
                transitions.append(transition)
        return transitions

    def on_watch_restored(self, indices: Iterable[int]) -> None:
        """The event watch covers `indices` again; their quiet period can start with the next
        passing probe."""
        for index in sorted(set(indices)):
            if index in self._states and self._states[index].watch_failure is not None:
                log.info("GPU %d: health watch restored", index)
                self._states[index] = replace(self._states[index], watch_failure=None)

    # ---- internals -----------------------------------------------------------------------------

    def _informational(self, event: HealthEvent) -> bool:
        """An Xid the driver says needs no recovery of this GPU (and the config does not force
        critical)."""
        action, xid = event.recovery_action, event.xid
        if action is None or xid is None or takes_gpu_out(action):
            return False
        return not (self._config.all_xids_critical or xid in self._config.critical_xids)

    def _reported(self, index: int, result: ProbeResult) -> GpuHealthState:
        """The state with the probe's recovery action noted; a new action is logged once."""
        state = self._states[index]
        action = result.recovery_action
        if action is None or action == state.reported_action:
            return state
        if not takes_gpu_out(action) and action != 0:
            log.warning(
                "GPU %d: the driver asks for %s; the GPU stays in service",
                index,
                recovery_action_name(action),
            )
        state = replace(state, reported_action=action)
        self._states[index] = state
        return state

    def _known(self, index: int, what: str) -> bool:
        if index in self._states:
            return True
        log.warning("%s for GPU %d, which is not watched; ignored", what, index)
        return False

    def _fail(
        self,
        index: int,
        state: GpuHealthState,
        reason: str,
        now_s: float,
        cause: HealthCause,
        xid: int | None = None,
        action: int | None = None,
    ) -> HealthTransition | None:
        if state.health is Health.UNHEALTHY:
            if state.last_failure != reason:  # say so once per new cause, not on every failed probe
                log.info("GPU %d: still Unhealthy, now: %s (quiet period restarts)", index, reason)
            self._states[index] = replace(state, last_failure=reason)
            return None
        self._states[index] = replace(
            state,
            health=Health.UNHEALTHY,
            reason=reason,
            last_failure=reason,
            cause=cause,
            xid=xid,
            recovery_action=action,
        )
        log.warning("GPU %d: Healthy -> Unhealthy (%s)", index, reason)
        return HealthTransition(
            index, Health.HEALTHY, Health.UNHEALTHY, reason, now_s, xid, cause, action
        )
