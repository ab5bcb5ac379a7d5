"""PluginManager: serve every resource on its own socket, keep it registered, survive kubelet restarts.

One control thread owns the servers. A generation is: stop the old servers, bind fresh sockets,
serve, then Register each resource (retried with backoff, never fatal; no lock held across the call).
A new generation starts when `kubelet.sock` is (re)created or one of our sockets vanishes. If the
kubelet ends a ListAndWatch stream while our socket stays, the resource is registered again once no
stream is left. stop() sends empty device lists, stops the servers and removes our own sockets; no
other file in the directory is ever touched.

The directory is taken as an absolute path at construction (a relative one would follow the working
directory). When it is missing or unwritable the generation fails with the directory and the OS
reason in the log, and is retried with backoff; it is never created after start-up (that is the
kubelet's job), only waited for. Besides the watch, the idle loop checks once a second that our
sockets and the kubelet.sock we registered with are still there, so a watch lost with a deleted
directory cannot hide a kubelet restart. `responsive()` calls GetDevicePluginOptions on our own
sockets (at most every PROBE_MAX_AGE_S): the liveness check that the servicer still answers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from device_plugin.errors import PluginError, RegistrationError
from device_plugin.kubelet.plugin_dir import DirectoryUnusable, describe_os_error, identity, inode, socket_name
from device_plugin.kubelet.plugin_dir_watch import DirectoryEvents, KubeletWatcher
from device_plugin.kubelet.registration import KUBELET_SOCKET_NAME, Backoff, RegistrationAbandoned, SelfProbe, register
from device_plugin.kubelet.served import Served, serve, stop_all
from device_plugin.kubelet.servicer import DevicePluginServicer, RpcObserver
from device_plugin.resources import ResourceManager

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LifecycleTiming:
    register_timeout_s: float = 20.0
    backoff: Backoff = field(default_factory=Backoff)
    stream_lost_grace_s: float = 1.0  # wait this long for a new stream before registering again
    stop_grace_s: float = 1.0
    debounce_s: float = 0.15
    probe_timeout_s: float = 1.0  # the self-probe's deadline: a servicer slower than this is not answering


PROBE_MAX_AGE_S = 0.5  # /healthz storms reuse one self-probe result this long
__all__ = ["LifecycleTiming", "PluginManager", "socket_name"]


class LifecycleObserver(RpcObserver, Protocol):
    """Hears registration states and kubelet restarts (the metrics hook), besides every RPC."""

    def registration_state(self, resource: str, state: str) -> None: ...  # registered|unregistered|failed

    def kubelet_restart_seen(self) -> None: ...


class PluginManager:
    def __init__(
        self,
        resources: Sequence[ResourceManager],
        plugin_dir: Path,
        *,
        timing: LifecycleTiming | None = None,
        observer: LifecycleObserver | None = None,
    ) -> None:
        names = [r.resource_name for r in resources]
        if len(set(names)) != len(names):
            raise PluginError(f"duplicate resource names: {names}")
        self._resources = tuple(resources)
        self._dir = Path(plugin_dir).absolute()  # relative to the start-up directory, never to a later one
        self._timing = timing or LifecycleTiming()
        self._observer = observer
        self._kubelet_socket = self._dir / KUBELET_SOCKET_NAME
        self._cond = threading.Condition()
        self._stopping = False
        self._restart_pending = False  # a new generation is due: kubelet restarted or a socket of ours is gone
        self._check_sockets = False
        self._lost: set[str] = set()
        self._served: dict[str, Served] = {}
        self._registrations = 0
        self._registered_with: tuple[int, int] | None = None  # identity of the kubelet.sock we registered with
        self._registering_with: tuple[int, int] | None = None  # ... and of the one a Register call is under way to
        self._thread: threading.Thread | None = None
        self._probe = SelfProbe(self._timing.probe_timeout_s, PROBE_MAX_AGE_S)
        self._watcher = KubeletWatcher(
            self._dir,
            lambda: [socket_name(n) for n in names],
            self._on_dir_events,
            debounce_s=self._timing.debounce_s,
        )

    # ---- public --------------------------------------------------------------------------------

    @property
    def registrations(self) -> int:
        """Successful Register calls so far (tests and the demo wait on it)."""
        with self._cond:
            return self._registrations

    def wait_for_registrations(self, count: int, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._registrations >= count, timeout_s)

    @property
    def resources(self) -> tuple[ResourceManager, ...]:
        return self._resources

    def serving(self) -> tuple[bool, str]:
        """Liveness: the control loop runs and every served socket is still ours."""
        if self._thread is None or not self._thread.is_alive():
            return False, "plugin manager control loop is not running"
        with self._cond:
            served = len(self._served)
        if served < len(self._resources):
            return False, f"serving {served} of {len(self._resources)} resources"
        if not self._sockets_intact():
            return False, "a plugin socket was removed or replaced; re-serving"
        ok, detail = self.responsive()
        if not ok:
            return False, detail
        return True, f"serving {served} resources"

    def responsive(self) -> tuple[bool, str]:
        """Liveness of the servicer itself: GetDevicePluginOptions on each of our sockets answers in time."""
        with self._cond:
            paths = [item.socket_path for item in self._served.values()]
        return self._probe.check(paths)

    def _notify(self, method: str, *args: str) -> None:
        if self._observer is None:
            return
        try:
            getattr(self._observer, method)(*args)
        except Exception:  # metrics must never break the lifecycle
            log.exception("lifecycle observer %s failed", method)

    def start(self) -> None:
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:  # not fatal: the control loop retries and the watch waits for the directory
            log.warning("cannot create %s: %s; waiting for it", self._dir, describe_os_error(error))
        self._watcher.start()
        self._thread = threading.Thread(target=self._control_loop, name="plugin-manager", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 4.0) -> None:
        """Empty lists to the kubelet, stop serving, remove our sockets. Bounded by `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        for resource in self._resources:
            resource.close()  # ListAndWatch streams send the empty list and end
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._watcher.stop()
        if self._thread is not None:
            self._thread.join(timeout=max(0.1, deadline - time.monotonic()))
        self._stop_servers(grace_s=min(self._timing.stop_grace_s, max(0.0, deadline - time.monotonic())))
        self._probe.close()
        log.info("stopped; removed our sockets from %s", self._dir)

    # ---- events --------------------------------------------------------------------------------

    def _on_dir_events(self, events: DirectoryEvents) -> None:
        with self._cond:
            # A kubelet.sock we registered with, or are registering with now, is no restart: we may have
            # seen it by polling before its creation event arrived (abandoning would register twice).
            known = (self._registered_with, self._registering_with)
            if events.kubelet_socket_created and identity(self._kubelet_socket) not in known:
                self._restart_pending = True
                if self._registered_with is not None:
                    self._notify("kubelet_restart_seen")
            if events.removed_sockets:
                self._check_sockets = True
                # One of the sockets we serve now is gone: serve afresh at once. Waiting for the idle
                # check is not enough: a Register under way (e.g. after a lost stream) would send the
                # kubelet to a socket that no longer exists and block for its whole dial timeout.
                if not self._sockets_intact():
                    self._restart_pending = True
            self._cond.notify_all()

    def _on_stream_ended(self, servicer: DevicePluginServicer) -> None:
        with self._cond:
            current = self._served.get(servicer.resource.resource_name)
            if current is not None and current.servicer is servicer:
                self._lost.add(servicer.resource.resource_name)
                self._cond.notify_all()

    def _interrupted(self) -> bool:
        return self._stopping or self._restart_pending

    # ---- control loop --------------------------------------------------------------------------

    def _control_loop(self) -> None:
        failures = self._timing.backoff.delays_s()
        while True:
            with self._cond:
                if self._stopping:
                    return
                self._restart_pending = False
                self._check_sockets = False
                self._lost.clear()
            try:
                self._new_generation()
                self._idle_until_next_generation()
                failures = self._timing.backoff.delays_s()
            except DirectoryUnusable as error:  # missing or unwritable: the kubelet may (re)create it
                delay_s = next(failures)
                log.warning("cannot serve: %s; retrying in %.2f s", error.strerror, delay_s)
                self._stop_servers(grace_s=0.0)
                self._wait_interruptible(delay_s)
            except Exception:  # a bug or an OS error must not leave the daemon half-alive: start over
                delay_s = next(failures)
                log.exception("plugin manager generation failed; serving afresh in %.2f s", delay_s)
                self._wait_interruptible(delay_s)

    def _new_generation(self) -> None:
        self._stop_servers(grace_s=self._timing.stop_grace_s)
        for resource in self._resources:
            served = self._serve(resource)
            if served is None:
                continue
            with self._cond:
                self._served[resource.resource_name] = served
        for name in list(self._served):
            if not self._register_with_retry(name):
                return

    def _idle_until_next_generation(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._interrupted() or self._check_sockets or bool(self._lost), timeout=1.0)
                if self._interrupted():
                    return
                self._check_sockets = False
                lost = bool(self._lost)
            # Checked at every wake-up, events or not: the watch may be gone with a deleted directory.
            if not self._sockets_intact():
                log.warning("one of our sockets was removed or replaced; serving fresh sockets")
                return
            if self._kubelet_replaced():
                log.warning("%s was re-created (kubelet restart); serving fresh sockets", self._kubelet_socket)
                with self._cond:
                    if self._registered_with is not None:
                        self._notify("kubelet_restart_seen")
                return
            if lost:
                self._reregister_lost_streams()

    def _kubelet_replaced(self) -> bool:
        """kubelet.sock exists but is not the one we registered with (a restart the watch did not report)."""
        current = identity(self._kubelet_socket)
        with self._cond:
            known = (self._registered_with, self._registering_with)
            return current is not None and self._registered_with is not None and current not in known

    def _reregister_lost_streams(self) -> None:
        with self._cond:
            self._cond.wait_for(self._interrupted, timeout=self._timing.stream_lost_grace_s)
            if self._interrupted():
                return
            lost, self._lost = self._lost, set()
        for name in sorted(lost):
            served = self._served.get(name)
            if served is not None and served.servicer.active_streams == 0:
                log.warning("%s: the kubelet holds no ListAndWatch stream; registering again", name)
                self._register_with_retry(name)

    # ---- serving -------------------------------------------------------------------------------

    def _serve(self, resource: ResourceManager) -> Served | None:
        self._notify("registration_state", resource.resource_name, "unregistered")
        served = serve(self._dir, resource, self._on_stream_ended, self._observer)
        if served is not None and inode(served.socket_path) != served.inode:
            with self._cond:  # deleted at once (a kubelet cleaning up): the next check re-serves
                self._check_sockets = True
        return served

    def _stop_servers(self, grace_s: float) -> None:
        with self._cond:
            served, self._served = list(self._served.values()), {}
        stop_all(served, grace_s)

    def _sockets_intact(self) -> bool:
        with self._cond:
            served = list(self._served.values())
        return all(inode(item.socket_path) == item.inode for item in served)

    # ---- registration --------------------------------------------------------------------------

    def _register_with_retry(self, name: str) -> bool:
        """Register until it succeeds; False when a stop or restart interrupts."""
        delays = self._timing.backoff.delays_s()
        waited_note = False
        while True:
            with self._cond:
                if self._interrupted():
                    return False
                served = self._served.get(name)
            if served is None:
                return False
            if not self._sockets_intact():  # the kubelet would dial a socket that is gone: serve afresh first
                with self._cond:
                    self._restart_pending = True
                return False
            if not self._kubelet_socket.exists():
                if not waited_note:
                    log.info("%s: waiting for %s before registering", name, self._kubelet_socket)
                    waited_note = True
                self._wait_interruptible(1.0)  # the watcher wakes us when kubelet.sock appears
                continue
            kubelet_identity = identity(self._kubelet_socket)
            with self._cond:
                self._registering_with = kubelet_identity
            try:
                register(
                    self._kubelet_socket,
                    served.socket_path.name,
                    name,
                    timeout_s=self._timing.register_timeout_s,
                    abandon=self._interrupted_now,
                )
            except RegistrationAbandoned:
                return False
            except (RegistrationError, ValueError) as error:
                delay_s = next(delays)
                log.warning("%s: registration failed (%s); retrying in %.2f s", name, error, delay_s)
                self._notify("registration_state", name, "failed")
                self._wait_interruptible(delay_s)
                continue
            with self._cond:
                served.registered = True
                self._registered_with = kubelet_identity
                self._registrations += 1
                self._cond.notify_all()
            log.info("%s: registered with %s as endpoint %s", name, self._kubelet_socket, served.socket_path.name)
            self._notify("registration_state", name, "registered")
            return True

    def _interrupted_now(self) -> bool:
        with self._cond:
            return self._interrupted()

    def _wait_interruptible(self, timeout_s: float) -> None:
        with self._cond:
            self._cond.wait_for(self._interrupted, timeout=timeout_s)
