"""Keeping one resource registered with the kubelet: the Register loop of PluginManager's
UNREGISTERED state, and which kubelet.sock we registered with (so that a re-created one is told from
a known one).

Boundary: the Register call itself is registration.py's; the state machine (lifecycle_state.py) is
shared with the manager (lifecycle.py), whose condition also guards the fields here. The manager
owns our socket: it hands in how to get the served socket while it is still ours, and the loop
leaves for RESTARTING when it is not (the kubelet would dial a socket that is gone).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from device_plugin.core.errors import RegistrationError
from device_plugin.dp_helper.lifecycle_state import LifecycleTiming, State, StateMachine
from device_plugin.dp_helper.registration import RegistrationAbandoned, register
from device_plugin.dp_helper.served import Served
from device_plugin.serving.socket_files import identity

log = logging.getLogger(__name__)
S = State
# as the docs quote it
SOCKET_GONE = "one of our sockets was removed or replaced; serving fresh sockets"


class KubeletRegistration:
    """One resource's registrations with the kubelet at `kubelet_socket`; fields guarded by
    `machine.cond`."""

    def __init__(
        self,
        name: str,
        kubelet_socket: Path,
        machine: StateMachine,
        timing: LifecycleTiming,
        notify: Callable[..., None],
    ) -> None:
        self._name = name
        self._kubelet_socket = kubelet_socket
        self._machine = machine
        self._cond = machine.cond
        self._timing = timing
        self._notify = notify
        self._count = 0
        # identity of the kubelet.sock we registered with
        self._registered_with: tuple[int, int] | None = None
        # ... and of the one a Register call is under way to
        self._registering_with: tuple[int, int] | None = None

    def wait_for(self, count: int, timeout_s: float) -> bool:
        """Until `count` Register calls have succeeded so far (tests wait on it)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._count >= count, timeout_s)

    @property
    def ever_registered(self) -> bool:
        with self._cond:
            return self._registered_with is not None

    def knows(self, kubelet_identity: tuple[int, int] | None) -> bool:
        """The kubelet.sock we registered with, or are registering with now: no restart. We may have
        seen it by polling before its creation event arrived (taking it for a restart would register
        twice)."""
        with self._cond:
            return kubelet_identity in (self._registered_with, self._registering_with)

    def kubelet_replaced(self) -> bool:
        """kubelet.sock exists but is not the one we registered with (a restart the watch did not
        report)."""
        current = identity(self._kubelet_socket)
        with self._cond:
            return (
                current is not None
                and self._registered_with is not None
                and not self.knows(current)
            )

    def run(self, state: State, served_if_ours: Callable[[], Served | None]) -> None:
        """Register until the kubelet accepts (REGISTERED) or an event moves the state elsewhere."""
        delays, timeout_s = self._timing.backoff.delays_s(), self._timing.register_timeout_s
        waited_note = False
        while True:
            served = served_if_ours()
            if served is None:  # the kubelet would dial a socket that is gone
                self._machine.move(S.RESTARTING, SOCKET_GONE, expect=state, level=logging.WARNING)
                return
            if not self._kubelet_socket.exists():
                if not waited_note:
                    log.info(
                        "%s: waiting for %s before registering", self._name, self._kubelet_socket
                    )
                    waited_note = True
                # the watch wakes us when it appears
                if self._machine.wait_while(state, 1.0) is not state:
                    return
                continue
            kubelet_identity = identity(self._kubelet_socket)
            with self._cond:
                if not self._machine.move(
                    S.REGISTERING, f"{self._kubelet_socket} is there", expect=state
                ):
                    return
                self._registering_with = kubelet_identity
            endpoint = served.socket_path.name
            try:
                register(
                    self._kubelet_socket,
                    endpoint,
                    self._name,
                    timeout_s=timeout_s,
                    abandon=self._moved_on,
                )
            except RegistrationAbandoned:
                return
            except (RegistrationError, ValueError) as error:
                delay_s = next(delays)
                log.warning(
                    "%s: registration failed (%s); retrying in %.2f s", self._name, error, delay_s
                )
                self._notify("registration_state", self._name, "failed")
                if not self._machine.move(
                    S.UNREGISTERED, "registration failed", expect=(S.REGISTERING, S.STREAM_LOST)
                ):
                    return
                if self._machine.wait_while(state, delay_s) is not state:
                    return
                continue
            with self._cond:
                self._registered_with = kubelet_identity
                self._count += 1
                self._cond.notify_all()
                # A stream that ended meanwhile keeps STREAM_LOST: its grace then decides.
                self._machine.move(S.REGISTERED, f"endpoint {endpoint}", expect=S.REGISTERING)
            log.info(
                "%s: registered with %s as endpoint %s", self._name, self._kubelet_socket, endpoint
            )
            self._notify("registration_state", self._name, "registered")
            return

    def _moved_on(self) -> bool:
        """An event took the state away from a Register under way: abandon it."""
        return self._machine.state not in (S.REGISTERING, S.STREAM_LOST)
