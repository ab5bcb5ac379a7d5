"""PluginManager: serve one resource on its own socket, keep it registered, survive kubelet
restarts.

One manager serves one resource; the daemon holds one per resource and replaces only those whose
devices or settings changed. Why not one manager for all: the kubelet treats each resource as its
own plugin (own socket, own Register, own streams), so their lifecycles never depend on each other.
Per resource the lifecycle is one state variable, a refused or slow Register cannot hold back
another resource, and a partial re-serve is "stop that manager, start this one" with no add/remove
protocol. The cost is a directory watch and a control thread per resource (a node serves a
handful); all sockets are served on the one process-wide loop (serving/event_loop.py).

The state machine is drawn in lifecycle_state.py; the Register loop, and which kubelet.sock we
registered with, are lifecycle_registration.py's. The control thread does the work of the state it
is in; other threads only move the state, which ends whatever wait the control thread is in. Backoff
delays grow over consecutive failed generations. No file in the directory but our socket is ever
touched (a path another process serves is waited for: serving/taken_socket.py); the directory
(absolute from construction) is created at start if it can be, and after that only waited for.
Our socket's name is dp_helper/plugin_dir.py's (fixed, or per instance for rolling updates).
serving() is the liveness check: the control thread runs, our socket is ours and answers
GetDevicePluginOptions within probe_timeout_s (reused for PROBE_MAX_AGE_S).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from device_plugin.dp_helper.lifecycle_registration import SOCKET_GONE, KubeletRegistration
from device_plugin.dp_helper.lifecycle_state import (
    LIVE,
    PROBE_MAX_AGE_S,
    WATCH_POLL_S,
    LifecycleObserver,
    LifecycleTiming,
    State,
    StateMachine,
)
from device_plugin.dp_helper.plugin_dir import SocketNaming
from device_plugin.dp_helper.plugin_dir_watch import DirectoryEvents, KubeletWatcher
from device_plugin.dp_helper.registration import KUBELET_SOCKET_NAME, SelfProbe
from device_plugin.dp_helper.served import Served, serve
from device_plugin.dp_helper.served_resource import ServedResource
from device_plugin.dp_helper.servicer import DevicePluginServicer
from device_plugin.serving.socket_files import DirectoryUnusable, describe_os_error, identity, inode
from device_plugin.serving.taken_socket import TakenSocket

log = logging.getLogger(__name__)
S = State
PATH_FREED = "the file that held our socket's path is gone or replaced; serving again"
TAKEN_BY = {  # who else serves our socket's path, when one does (for the one ERROR)
    "likely": "NVIDIA's device plugin, or a second copy of this plugin on the same "
    "--device-plugin-dir",
    "remedy": "Run one device plugin per node.",
}


class PluginManager:
    def __init__(
        self,
        resource: ServedResource,
        plugin_dir: Path,
        *,
        timing: LifecycleTiming | None = None,
        observer: LifecycleObserver | None = None,
        naming: SocketNaming | None = None,
    ) -> None:
        self._resource = resource
        self._name = resource.resource_name
        # relative to the start-up directory, never to a later one
        self._dir = Path(plugin_dir).absolute()
        self._timing = timing or LifecycleTiming()
        self._observer = observer
        self._kubelet_socket = self._dir / KUBELET_SOCKET_NAME
        self._machine = StateMachine(self._name)
        self._cond = self._machine.cond  # guards the fields below together with the state
        self._served: Served | None = None
        self._naming = naming or SocketNaming()
        self._socket_path = self._dir / self._naming.socket_file(self._name, self._dir)
        # inode of the file that kept us NOT_SERVING (lstat: links too)
        self._blocked_by: int | None = None
        self._registration = KubeletRegistration(
            self._name, self._kubelet_socket, self._machine, self._timing, self._notify
        )
        self._thread: threading.Thread | None = None
        self._probe = SelfProbe(self._timing.probe_timeout_s, PROBE_MAX_AGE_S)
        self._taken = TakenSocket(self._name, self._socket_path, self._timing.backoff, **TAKEN_BY)
        self._watcher = KubeletWatcher(
            self._dir,
            self._socket_path.name,
            self._on_dir_events,
            debounce_s=self._timing.debounce_s,
        )

    # ---- public --------------------------------------------------------------------------------

    def serving(self) -> tuple[bool, str]:
        """Liveness: the control thread runs, our socket is still ours and the servicer answers on
        it."""
        if self._thread is None or not self._thread.is_alive():
            return False, "plugin manager control loop is not running"
        with self._cond:
            served, state = self._served, self._machine.state
        # alive and doing what it should; a restart would not help (/readyz is red)
        if state is S.SOCKET_TAKEN:
            return True, self._taken.waiting()
        if served is None:
            return False, f"not serving ({state.value})"
        if not self._socket_intact():
            return False, "our socket was removed or replaced; re-serving"
        ok, detail = self._probe.check(served.socket_path)
        return (True, f"serving {self._name}") if ok else (False, detail)

    def socket_taken(self) -> str:
        """Why we wait instead of serving (another process serves our socket's path); "" when we do
        not."""
        return self._taken.waiting()

    def start(self) -> None:
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
        # not fatal: the control loop retries and the watch waits for the directory
        except OSError as error:
            log.warning("cannot create %s: %s; waiting for it", self._dir, describe_os_error(error))
        self._watcher.start()
        self._thread = threading.Thread(
            target=self._control_loop, name=f"plugin-manager {self._name}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 4.0) -> None:
        """Empty list to the kubelet, stop serving, remove our socket. Bounded by `timeout_s`.

        No empty list when another instance serves the resource (a rolling update): the kubelet
        keeps one device set per resource name, so our empty list would take the newer instance's
        GPUs away."""
        deadline = time.monotonic() + timeout_s
        siblings = self._naming.live_siblings(self._name, self._dir, self._socket_path.name)
        if siblings:
            others = ", ".join(siblings)
            log.info(
                "%s: %s served by another instance; leaving without the empty list",
                self._name,
                others,
            )
        else:
            self._resource.close()  # ListAndWatch streams send the empty list and end
        self._machine.move(S.STOPPING, "stop requested", expect=LIVE)
        self._watcher.stop()
        if self._thread is not None:
            self._thread.join(timeout=max(0.1, deadline - time.monotonic()))
        removed = self._stop_server(
            grace_s=min(self._timing.stop_grace_s, max(0.0, deadline - time.monotonic()))
        )
        if siblings:  # only now: nothing streams any more, so no empty list goes out
            self._resource.close()
        self._probe.close()
        self._machine.move(S.STOPPED, "server stopped", expect=S.STOPPING)
        if removed:
            log.info("%s: stopped; removed our socket %s", self._name, self._socket_path)
        # never served (another process held the path), or the socket was already gone or replaced
        else:
            log.info("%s: stopped; no socket of ours to remove in %s", self._name, self._dir)

    # ---- events (watch thread, serving loop) ---------------------------------------------------

    def _on_dir_events(self, events: DirectoryEvents) -> None:
        with self._cond:
            if events.kubelet_socket_created and not self._registration.knows(
                identity(self._kubelet_socket)
            ):
                if self._registration.ever_registered:
                    self._notify("kubelet_restart_seen")
                    self._machine.move(
                        S.RESTARTING, "kubelet.sock was created (kubelet restart)", expect=LIVE
                    )
                # the first kubelet: register now, nothing to re-serve
                elif self._machine.state is S.UNREGISTERED:
                    self._machine.nudge()
            # At once, not at the next poll: a Register under way would send the kubelet to a socket
            # that no longer exists and block for its whole dial timeout.
            if events.own_socket_removed and not self._socket_intact():
                self._machine.move(S.RESTARTING, SOCKET_GONE, expect=LIVE, level=logging.WARNING)
            elif events.own_socket_removed and self._machine.state is S.NOT_SERVING:
                self._machine.move(S.RESTARTING, PATH_FREED, expect=S.NOT_SERVING)

    def _on_stream_ended(self, servicer: DevicePluginServicer) -> None:
        with self._cond:
            if self._served is not None and self._served.servicer is servicer:
                expect = (S.REGISTERING, S.REGISTERED)
                self._machine.move(
                    S.STREAM_LOST, "the kubelet ended a ListAndWatch stream", expect=expect
                )

    def _notify(self, method: str, *args: str) -> None:
        try:
            if self._observer is not None:
                getattr(self._observer, method)(*args)
        except Exception:  # metrics must never break the lifecycle
            log.exception("lifecycle observer %s failed", method)

    # ---- control thread ------------------------------------------------------------------------

    def _control_loop(self) -> None:
        work = {
            S.RESTARTING: self._serve_afresh,
            S.UNREGISTERED: self._register,
            S.REGISTERED: self._watch,
            S.NOT_SERVING: self._wait_for_path,
            S.SOCKET_TAKEN: self._wait_for_socket,
            S.STREAM_LOST: self._after_stream_lost,
        }
        failures = self._timing.backoff.delays_s()
        previous: State | None = None
        while (state := self._machine.state) in LIVE:
            if state is S.RESTARTING and previous not in (S.WAITING_FOR_DIRECTORY, S.FAILED):
                failures = self._timing.backoff.delays_s()  # the last generation ended normally
            previous = state
            try:
                work[state](state)
            # missing or unwritable: the kubelet may (re)create it
            except DirectoryUnusable as error:
                self._stop_server(grace_s=0.0)
                reason = f"cannot serve: {error.strerror}"
                self._machine.back_off(
                    S.WAITING_FOR_DIRECTORY, next(failures), reason, expect=S.RESTARTING
                )
            # a bug or an OS error must not leave the daemon half-alive: start over
            except Exception:
                log.exception("%s: serving failed in state %s", self._name, state.value)
                self._machine.back_off(
                    S.FAILED, next(failures), "unexpected error (logged above)", expect=LIVE
                )

    def _serve_afresh(self, state: State) -> None:
        self._stop_server(grace_s=self._timing.stop_grace_s)
        self._notify("registration_state", self._name, "unregistered")
        # never bind over another live server: the two would replace each other for ever
        if self._taken.taken():
            self._machine.move(
                S.SOCKET_TAKEN, "another process serves our socket's path", expect=state
            )
            return
        served = serve(
            self._dir, self._socket_path.name, self._resource, self._on_stream_ended, self._observer
        )
        if served is None:
            self._blocked_by = inode(self._socket_path)
            self._machine.move(S.NOT_SERVING, "cannot bind our socket (logged above)", expect=state)
            return
        with self._cond:
            self._served = served
        self._taken.bound()
        # deleted at once (a kubelet cleaning up): again
        if inode(served.socket_path) != served.inode:
            log.warning(
                "%s: %s was removed as soon as it was bound; serving afresh",
                self._name,
                served.socket_path,
            )
            return
        self._machine.move(S.UNREGISTERED, f"serving on {served.socket_path}", expect=state)

    def _watch(self, state: State) -> None:
        if self._machine.wait_while(state, WATCH_POLL_S) is not state:
            return
        # Looked at every second, events or not: the watch may be gone with a deleted directory.
        if not self._socket_intact():
            self._machine.move(S.RESTARTING, SOCKET_GONE, expect=state, level=logging.WARNING)
        else:
            self._watch_kubelet(state)

    def _watch_kubelet(self, state: State) -> None:
        if self._registration.kubelet_replaced():
            self._notify("kubelet_restart_seen")
            reason = (
                f"{self._kubelet_socket} was re-created (kubelet restart); serving fresh sockets"
            )
            self._machine.move(S.RESTARTING, reason, expect=state, level=logging.WARNING)

    def _wait_for_path(self, state: State) -> None:
        """NOT_SERVING: another file held our path (or gRPC could not bind). Looked at every second,
        because a directory or a dangling link removed from the path may raise no event for our
        socket's name."""
        if self._machine.wait_while(state, WATCH_POLL_S) is not state:
            return
        if inode(self._socket_path) != self._blocked_by:
            self._machine.move(S.RESTARTING, PATH_FREED, expect=state)
        else:
            self._watch_kubelet(state)

    def _wait_for_socket(self, state: State) -> None:
        if self._machine.wait_while(state, self._taken.next_delay_s()) is not state:
            return
        if self._taken.free_again():
            self._machine.move(S.RESTARTING, "our socket's path is free again", expect=state)

    def _register(self, state: State) -> None:
        self._registration.run(state, self._served_if_ours)

    def _after_stream_lost(self, state: State) -> None:
        if self._machine.wait_while(state, self._timing.stream_lost_grace_s) is not state:
            return
        with self._cond:
            served = self._served
        if served is None or served.servicer.active_streams == 0:
            reason = "the kubelet holds no ListAndWatch stream; registering again"
            self._machine.move(S.UNREGISTERED, reason, expect=state, level=logging.WARNING)
        else:
            self._machine.move(S.REGISTERED, "the kubelet holds a stream again", expect=state)

    # ---- our socket and the kubelet's ----------------------------------------------------------

    def _stop_server(self, grace_s: float) -> bool:
        """Stop our server if one runs; True when our socket was still there and is now removed."""
        with self._cond:
            served, self._served = self._served, None
        return served is not None and served.stop(grace_s)

    def _socket_intact(self) -> bool:
        with self._cond:
            served = self._served
        return served is None or inode(served.socket_path) == served.inode

    def _served_if_ours(self) -> Served | None:
        """The served socket while it is still ours (the Register loop checks before each
        attempt)."""
        with self._cond:
            served = self._served
        return served if served is not None and self._socket_intact() else None
