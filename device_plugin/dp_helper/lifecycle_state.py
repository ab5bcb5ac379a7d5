"""What the serving lifecycle is made of, apart from its work: the states, the transitions allowed
between them, the one place the state changes, the timings it runs on and the observer it reports
to.

Boundary: it does nothing itself (no files, no sockets, no kubelet calls). PluginManager
(lifecycle.py) drives this machine from its control thread, while the directory watch, ending
streams and stop() move it from other threads; this module keeps their moves consistent, logs each
one and lets the control thread wait for the next. TRANSITIONS is the diagram
in executable form: a move it does not list is a bug and raises.

Every move names the states it expects to leave (`expect`). A move whose expected state is already
gone is refused (False), never an error: an event got there first (a stop, a kubelet restart), and
the control thread then acts on the state the event left.

The diagram: what PluginManager's control thread does in each state, and the events that move it.

    state                  control thread                               next
    RESTARTING (initial)   stop the old server, bind a fresh 0600       UNREGISTERED; NOT_SERVING
    (another file
                           socket                                       holds the path, or it cannot
                           be bound);
                                                                        WAITING_FOR_DIRECTORY
                                                                        (missing/unwritable);
                                                                        SOCKET_TAKEN (another
                                                                        process serves it)
    WAITING_FOR_DIRECTORY  wait a backoff delay, server stopped         RESTARTING
    SOCKET_TAKEN           after each backoff delay: path still         RESTARTING once it is free
                           served by another process? (serving/taken_socket.py)
    NOT_SERVING            every 1 s (and on a watch event): the file   RESTARTING if either
                           at our path gone or replaced? kubelet.sock
                           replaced?
    UNREGISTERED           wait for kubelet.sock; our socket still ours REGISTERING (RESTARTING if
    not ours) REGISTERING            Register, abandoned when the state moves     REGISTERED;
    UNREGISTERED for a backoff
                                                                        delay when refused
    REGISTERED             every 1 s: our socket and kubelet.sock the   RESTARTING if either changed
                           same? (a watch dies with its directory)
    STREAM_LOST            wait stream_lost_grace_s                     UNREGISTERED if the kubelet
    holds no
                                                                        stream, else REGISTERED
    FAILED                 wait a backoff delay                         RESTARTING

    event (other threads)                                               move
    kubelet.sock created and not the one we registered or are           any live state -> RESTARTING
    registering with (kubelet restart); our socket removed or replaced
    the kubelet ended a ListAndWatch stream of our current server       REGISTERING, REGISTERED ->
    STREAM_LOST an unexpected error in the control thread                           any live state
    -> FAILED stop(): empty list sent, server stopped, our socket removed         any live state ->
    STOPPING -> STOPPED
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from device_plugin.core.backoff import Backoff
from device_plugin.dp_helper.servicer import RpcObserver

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LifecycleTiming:
    register_timeout_s: float = 20.0
    backoff: Backoff = field(default_factory=Backoff)
    stream_lost_grace_s: float = 1.0  # wait this long for a new stream before registering again
    stop_grace_s: float = 1.0
    debounce_s: float = 0.15
    # the self-probe's deadline: a servicer slower than this is not answering
    probe_timeout_s: float = 1.0


PROBE_MAX_AGE_S = 0.5  # /healthz storms reuse one self-probe result this long
WATCH_POLL_S = 1.0  # how often REGISTERED and NOT_SERVING look at the directory themselves


class LifecycleObserver(RpcObserver, Protocol):
    """Hears registration states and kubelet restarts (the metrics hook), besides every RPC."""

    # registered|unregistered|failed
    def registration_state(self, resource: str, state: str) -> None: ...

    def kubelet_restart_seen(self) -> None: ...


class State(Enum):
    # a fresh socket is due: at start, after a kubelet restart, our socket gone
    RESTARTING = "restarting"
    WAITING_FOR_DIRECTORY = "waiting-for-directory"  # missing or unwritable: retried with backoff
    NOT_SERVING = "not-serving"  # another file holds our socket's path, or gRPC cannot bind it
    # another process serves our socket's path: wait (backoff) until it is free
    SOCKET_TAKEN = "socket-taken"
    # socket served; waiting for kubelet.sock, or backing off a refusal
    UNREGISTERED = "serving-unregistered"
    REGISTERING = "registering"  # a Register call is under way
    # checking every second that our socket and the kubelet's are still the same
    REGISTERED = "registered"
    # the kubelet ended a ListAndWatch stream; register again if none is left
    STREAM_LOST = "stream-lost"
    FAILED = "failed"  # an unexpected error (a bug, an OS error): serve afresh after a backoff
    STOPPING = "stopping"
    STOPPED = "stopped"


S = State
LIVE = frozenset(s for s in State if s not in (S.STOPPING, S.STOPPED))

TRANSITIONS: dict[State, frozenset[State]] = {
    S.RESTARTING: frozenset(
        {S.UNREGISTERED, S.NOT_SERVING, S.WAITING_FOR_DIRECTORY, S.SOCKET_TAKEN}
    ),
    S.WAITING_FOR_DIRECTORY: frozenset({S.RESTARTING}),
    S.SOCKET_TAKEN: frozenset({S.RESTARTING}),
    S.NOT_SERVING: frozenset({S.RESTARTING}),
    S.UNREGISTERED: frozenset({S.REGISTERING, S.RESTARTING}),
    S.REGISTERING: frozenset({S.REGISTERED, S.UNREGISTERED, S.STREAM_LOST, S.RESTARTING}),
    S.REGISTERED: frozenset({S.STREAM_LOST, S.RESTARTING}),
    S.STREAM_LOST: frozenset({S.REGISTERED, S.UNREGISTERED, S.RESTARTING}),
    S.FAILED: frozenset({S.RESTARTING}),
    S.STOPPING: frozenset({S.STOPPED}),
    S.STOPPED: frozenset(),
}
for _state in LIVE:  # from anywhere alive: a stop, and an unexpected error
    TRANSITIONS[_state] |= {S.STOPPING, S.FAILED}


class IllegalTransition(RuntimeError):
    """A move the diagram does not allow: a bug in the lifecycle."""


class StateMachine:
    """One resource's lifecycle state. `cond` also guards the manager's own fields, so that what it
    reads and the state it decides on are seen together."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._state = S.RESTARTING
        self._nudges = 0  # nudge() count: a change ends wait_while like a move does
        self.cond = threading.Condition()

    @property
    def state(self) -> State:
        with self.cond:
            return self._state

    def move(
        self,
        to: State,
        reason: str,
        *,
        expect: State | Collection[State],
        level: int = logging.INFO,
    ) -> bool:
        """Move to `to` if the state is one of `expect` (logged with `reason`); False if it is not
        any more.

        Already in `to`: nothing to do, True."""
        expected = (expect,) if isinstance(expect, State) else expect
        with self.cond:
            current = self._state
            if current not in expected:
                return False
            if to is current:
                return True
            if to not in TRANSITIONS[current]:
                raise IllegalTransition(f"{self._name}: {current.value} -> {to.value} ({reason})")
            self._state = to
            self.cond.notify_all()
            log.log(level, "%s: %s -> %s: %s", self._name, current.value, to.value, reason)
        return True

    def wait_while(self, state: State, timeout_s: float) -> State:
        """Wait until the state is no longer `state` or nudge() is called, at most `timeout_s`; the
        state then."""
        with self.cond:
            nudges = self._nudges
            self.cond.wait_for(
                lambda: self._state is not state or self._nudges != nudges, timeout=timeout_s
            )
            return self._state

    def nudge(self) -> None:
        """End the control thread's current wait without a move: look again now (e.g. kubelet.sock
        appeared)."""
        with self.cond:
            self._nudges += 1
            self.cond.notify_all()

    def back_off(
        self, state: State, delay_s: float, reason: str, *, expect: State | Collection[State]
    ) -> None:
        """Enter `state` (from `expect`), stay `delay_s` unless an event moves it first, then
        RESTARTING."""
        if self.move(
            state, f"{reason}; retrying in {delay_s:.2f} s", expect=expect, level=logging.WARNING
        ):
            self.wait_while(state, delay_s)
            self.move(S.RESTARTING, "retrying", expect=state)
