"""PluginManager: serve every resource on its own socket, keep it registered, survive kubelet restarts.

One control thread owns the servers. A generation is: stop the old servers, bind fresh sockets,
serve, then Register each resource (retried with backoff, never fatal; no lock held across the call).
A new generation starts when `kubelet.sock` is (re)created or one of our sockets vanishes. If the
kubelet ends a ListAndWatch stream while our socket stays, the resource is registered again once no
stream is left. stop() sends empty device lists, stops the servers and removes our own sockets; no
other file in the directory is ever touched.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import grpc

from api import deviceplugin_pb2_grpc as pb_grpc
from device_plugin.errors import PluginError, RegistrationError
from device_plugin.kubelet_watch import DirectoryEvents, KubeletWatcher
from device_plugin.registration import KUBELET_SOCKET_NAME, Backoff, RegistrationAbandoned, register
from device_plugin.resources import ResourceManager
from device_plugin.server import DevicePluginServicer, RpcObserver

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LifecycleTiming:
    register_timeout_s: float = 20.0
    backoff: Backoff = field(default_factory=Backoff)
    stream_lost_grace_s: float = 1.0  # wait this long for a new stream before registering again
    stop_grace_s: float = 1.0
    debounce_s: float = 0.15
    server_threads: int = 32


class LifecycleObserver(RpcObserver, Protocol):
    """Hears registration states and kubelet restarts (the metrics hook), besides every RPC."""

    def registration_state(self, resource: str, state: str) -> None: ...  # registered|unregistered|failed

    def kubelet_restart_seen(self) -> None: ...


def socket_name(resource_name: str) -> str:
    """`nvidia.com/gpu` -> `nvidia-gpu.sock` (NVIDIA's naming, so operators find it where they expect)."""
    vendor, _, name = resource_name.partition("/")
    return f"{vendor.split('.')[0]}-{name}.sock"


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file is at `path` now: (inode, ctime in ns); a re-created file differs in at least one."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_ctime_ns)


@dataclass
class _Served:
    resource: ResourceManager
    socket_path: Path
    server: grpc.Server
    servicer: DevicePluginServicer
    inode: int
    registered: bool = False


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
        self._dir = Path(plugin_dir)
        self._timing = timing or LifecycleTiming()
        self._observer = observer
        self._kubelet_socket = self._dir / KUBELET_SOCKET_NAME
        self._cond = threading.Condition()
        self._stopping = False
        self._restart_pending = False  # a new generation is due: kubelet restarted or a socket of ours is gone
        self._check_sockets = False
        self._lost: set[str] = set()
        self._served: dict[str, _Served] = {}
        self._registrations = 0
        self._registered_with: tuple[int, int] | None = None  # identity of the kubelet.sock we registered with
        self._registering_with: tuple[int, int] | None = None  # ... and of the one a Register call is under way to
        self._thread: threading.Thread | None = None
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

    def socket_paths(self) -> list[Path]:
        return [self._dir / socket_name(r.resource_name) for r in self._resources]

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
        return True, f"serving {served} resources"

    def _notify(self, method: str, *args: str) -> None:
        if self._observer is None:
            return
        try:
            getattr(self._observer, method)(*args)
        except Exception:  # metrics must never break the lifecycle
            log.exception("lifecycle observer %s failed", method)

    def start(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
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
        log.info("stopped; removed our sockets from %s", self._dir)

    # ---- events --------------------------------------------------------------------------------

    def _on_dir_events(self, events: DirectoryEvents) -> None:
        with self._cond:
            # A kubelet.sock we registered with, or are registering with now, is no restart: we may have
            # seen it by polling before its creation event arrived (abandoning would register twice).
            known = (self._registered_with, self._registering_with)
            if events.kubelet_socket_created and _identity(self._kubelet_socket) not in known:
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
                check_sockets, self._check_sockets = self._check_sockets, False
                lost = bool(self._lost)
            if check_sockets and not self._sockets_intact():
                log.warning("one of our sockets was removed or replaced; serving fresh sockets")
                return
            if lost:
                self._reregister_lost_streams()

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

    def _serve(self, resource: ResourceManager) -> _Served | None:
        path = self._dir / socket_name(resource.resource_name)
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None:
            if not stat.S_ISSOCK(mode):
                log.error(
                    "%s exists and is not a socket; not touching it, not serving %s", path, resource.resource_name
                )
                return None
            path.unlink()  # our own stale socket from an earlier run
        servicer = DevicePluginServicer(resource, on_stream_ended=self._on_stream_ended, observer=self._observer)
        self._notify("registration_state", resource.resource_name, "unregistered")
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._timing.server_threads))
        pb_grpc.add_DevicePluginServicer_to_server(servicer, server)
        try:
            server.add_insecure_port(f"unix://{path}")
        except RuntimeError as error:
            log.error("cannot bind %s for %s: %s", path, resource.resource_name, error)
            return None
        server.start()
        try:
            inode = os.stat(path).st_ino
        except FileNotFoundError:  # deleted at once (a kubelet cleaning up): the next check re-serves
            inode = -1
            with self._cond:
                self._check_sockets = True
        log.info("%s: serving on %s", resource.resource_name, path)
        return _Served(resource, path, server, servicer, inode)

    def _stop_servers(self, grace_s: float) -> None:
        with self._cond:
            served, self._served = list(self._served.values()), {}
        for item in served:
            item.servicer.shutdown()
        # gRPC unlinks each socket when its server stops; stopping before binding anew keeps it from
        # unlinking a fresh socket at the same path.
        events = [item.server.stop(grace_s) for item in served]
        for event in events:
            event.wait(grace_s + 1.0)
        for item in served:
            self._remove_own_socket(item)

    @staticmethod
    def _remove_own_socket(item: _Served) -> None:
        try:
            st = item.socket_path.lstat()
        except FileNotFoundError:
            return
        if stat.S_ISSOCK(st.st_mode) and st.st_ino == item.inode:
            item.socket_path.unlink(missing_ok=True)

    def _sockets_intact(self) -> bool:
        with self._cond:
            served = list(self._served.values())
        for item in served:
            try:
                if item.socket_path.lstat().st_ino != item.inode:
                    return False
            except FileNotFoundError:
                return False
        return True

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
            kubelet_identity = _identity(self._kubelet_socket)
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
