"""The DRA driver's two kubelet sockets, served and kept: the DRAPlugin endpoint and the
registration socket.

Boundary: keeping the sockets served (where they go: service/socket_paths.py); the servicers
(service/servicers.py) do the talking, device_plugin.serving does the binding. GetInfo lists every
served version as "<proto package>.DRAPlugin", and "<package>.DRAResourceHealth" for the
device-health service (service/health_service.py) served on the same endpoint when the driver hands
a DeviceHealthFeed.

Both are served by grpc.aio on the process's one serving loop, bound 0600 whatever the umask. A
foreign file at either path is refused and left untouched (logged; serving() says so); a path
another process serves is waited for, not bound over (serving/taken_socket.py; socket_taken() says
so). A thread looks every `poll_s`: a socket (or its folder) that was removed is served afresh, the
endpoint first; the registration socket reappearing makes the kubelet register us again, so its
`status` is forgotten then. The registration socket is served only while the endpoint is: the
kubelet must not be sent to an endpoint we cannot serve. stop() removes only sockets that are still
ours.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial

import grpc

from api import dra_v1_pb2, dra_v1_pb2_grpc
from api import pluginregistration_pb2 as reg_pb2
from api import pluginregistration_pb2_grpc as reg_grpc
from device_plugin.core.errors import ConfigError
from device_plugin.dra_helper.claims.prepare import Preparer
from device_plugin.dra_helper.service.device_health import DeviceHealthFeed
from device_plugin.dra_helper.service.health_service import (
    HEALTH_VERSIONS,
    HEARTBEAT_S,
    add_health_servicers,
)
from device_plugin.dra_helper.service.instance_lock import INSTANCE_LOCK, CallLock, FileLock
from device_plugin.dra_helper.service.offload import WEDGED_AFTER_S, Offload
from device_plugin.dra_helper.service.servicers import (
    SERVED,
    SUPPORTED_VERSIONS,
    Registration,
    dra_servicer,
)
from device_plugin.dra_helper.service.socket_paths import SocketPaths, check_socket_paths
from device_plugin.serving.kept_socket import KeptSocket
from device_plugin.serving.probe import SocketProbe
from device_plugin.serving.socket_files import describe_os_error

__all__ = ["SUPPORTED_VERSIONS", "DraGrpcServer"]

log = logging.getLogger(__name__)

KEEP_POLL_S = 0.5  # how often the sockets are looked at (a removed one is back within this)
PROBE_TIMEOUT_S = 1.0  # a server slower than this to answer the liveness probe is not answering
PROBE_MAX_AGE_S = 0.5  # /healthz storms reuse one probe answer this long


def _get_info(channel: grpc.Channel, timeout_s: float) -> object:
    return reg_grpc.RegistrationStub(channel).GetInfo(reg_pb2.InfoRequest(), timeout=timeout_s)


def _empty_unprepare(channel: grpc.Channel, timeout_s: float) -> object:
    # no claims: answered on the loop, no Preparer call
    request = dra_v1_pb2.NodeUnprepareResourcesRequest()
    return dra_v1_pb2_grpc.DRAPluginStub(channel).NodeUnprepareResources(request, timeout=timeout_s)


class DraGrpcServer:
    """Both sockets; start() serves them and keeps them served, stop() removes them (the kubelet
    deregisters)."""

    def __init__(
        self,
        driver_name: str,
        paths: SocketPaths,
        preparer: Preparer,
        on_registered: Callable[[], None] | None = None,
        *,
        poll_s: float = KEEP_POLL_S,
        wedged_after_s: float = WEDGED_AFTER_S,
        health: DeviceHealthFeed | None = None,
        health_heartbeat_s: float = HEARTBEAT_S,
        calls: CallLock | None = None,
        on_open: Callable[[], None] | None = None,
    ) -> None:
        """`calls`: rolling-update mode (per-instance socket names): the instance lock held shared
        (beside the other rolling-update instance, never beside a fixed-name one); the checkpoint is
        read, and each claim change made, under this lock shared with the other instance. `on_open`:
        called once the checkpoint is read, before claim calls are taken and the kubelet is sent to
        us (a failure is logged; serving goes on)."""
        self.driver_name = driver_name
        self._paths = paths
        self._poll_s = poll_s
        self._preparer = preparer
        self._calls = calls
        self._on_open = on_open
        self._instance = FileLock(paths.endpoint.parent / INSTANCE_LOCK, shared=calls is not None)
        self._opened = False  # the checkpoint read and the claim pools open: claims are served
        self._open_problem = ""  # why the checkpoint could not be read (the keeper tries again)
        self._lock_problem = ""  # why the instance lock could not be made
        # another instance took the instance lock while we served: never serve again
        self._lost = False
        served = SUPPORTED_VERSIONS + (HEALTH_VERSIONS if health is not None else ())
        self.registration = Registration(driver_name, str(paths.endpoint), on_registered, served)
        self._offload = Offload(wedged_after_s=wedged_after_s)
        versions = [
            (pb_grpc, dra_servicer(pb, pb_grpc, preparer, self._offload))
            for pb, pb_grpc, _ in SERVED
        ]

        def add_dra(server: grpc.aio.Server) -> None:
            for pb_grpc, servicer in versions:
                pb_grpc.add_DRAPluginServicer_to_server(servicer, server)
            if health is not None:
                add_health_servicers(server, health, health_heartbeat_s)

        add_registration = partial(reg_grpc.add_RegistrationServicer_to_server, self.registration)
        taken_by = (  # who else serves our paths, when one does (the one ERROR names them)
            "NVIDIA's DRA driver for GPUs, or a second copy of this driver, with driver name "
            f"{driver_name}",
            "Run one DRA driver per driver name on a node, or set another "
            "gpuDevicePlugin.driverName.",
        )
        self._endpoint = KeptSocket(
            paths.endpoint, f"DRA driver {driver_name}", add_dra, taken_by=taken_by
        )
        self._registrar = KeptSocket(
            paths.registration,
            f"DRA registration {driver_name}",
            add_registration,
            taken_by=taken_by,
        )
        self._probe = SocketProbe(PROBE_TIMEOUT_S, PROBE_MAX_AGE_S)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Serve both sockets now (the endpoint first) and keep them served. ConfigError: a path too
        long."""
        check_socket_paths(self.driver_name, self._paths)
        self._stopping.clear()
        self._keep()
        self._thread = threading.Thread(target=self._keep_loop, name="dra-sockets", daemon=True)
        self._thread.start()

    def stop(self, grace_s: float = 1.0) -> None:
        """Registration socket first (the kubelet deregisters us), then the endpoint; ours only."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        self._registrar.stop(grace_s)
        self._endpoint.stop(grace_s)
        self._probe.close()
        self._offload.close()
        self._opened = False
        self._instance.release()

    @property
    def paths(self) -> SocketPaths:
        return self._paths

    def opened(self) -> bool:
        """The checkpoint is read and claims are served."""
        return self._opened

    def socket_taken(self) -> str:
        """Why we wait instead of serving: another instance holds the instance lock, or another
        process serves one of our paths; "" when neither is so."""
        if self._thread is not None and not self._opened and not self._instance.held():
            return self._instance.waiting()
        return self._endpoint.taken() or self._registrar.taken()

    def serving(self) -> tuple[bool, str]:
        """Liveness: both sockets are ours, at their paths, and answer (GetInfo; an empty
        Unprepare), and no Prepare or Unprepare work has been stuck past the offload's limit."""
        if self._thread is None or not self._thread.is_alive():
            return (
                False,
                f"the DRA sockets of {self.driver_name} are not kept (not started, or stopped)",
            )
        for problem in (self._lost_problem(), self._lock_problem, self._open_problem):
            if problem:
                return False, problem
        for kept in (self._endpoint, self._registrar):
            problem = kept.problem()
            if problem:
                return False, problem
        for path, name, call in (
            (self._paths.registration, "GetInfo", _get_info),
            (self._paths.endpoint, "NodeUnprepareResources", _empty_unprepare),
        ):
            ok, detail = self._probe.check(path, name, call)
            if not ok:
                return False, detail
        wedged = self._offload.wedged()
        if wedged is not None:
            return False, wedged
        return True, f"serving DRA driver {self.driver_name} on {self._paths.endpoint}"

    # ---- keeping the sockets -------------------------------------------------------------------

    def _keep_loop(self) -> None:
        while not self._stopping.wait(self._poll_s):
            try:
                self._keep()
            # the keeper must outlive a surprise; serving() reports what it left undone
            except Exception:
                log.exception(
                    "keeping the DRA sockets of %s failed; trying again", self.driver_name
                )

    def _keep(self) -> None:
        """The instance lock, then the endpoint, then the checkpoint (read only once both are ours),
        then the registration socket: the kubelet is sent to us only once claims can be answered."""
        if not self._own_instance():
            return
        self._endpoint.keep()
        if not self._endpoint.intact():
            if self._registrar.intact():
                log.warning(
                    "%s: withdrawing the registration socket while the endpoint is not served",
                    self.driver_name,
                )
            self._registrar.stop(
                0.0, problem="not registering while the DRA endpoint is not served"
            )
            return
        if not self._opened and not self._open():
            return
        if self._registrar.keep():
            self.registration.status = None  # a fresh socket: the kubelet registers us anew

    def _lost_problem(self) -> str:
        if not self._lost:
            return ""
        return (
            f"another instance took {self._instance.path} while we served; restart to read the "
            "checkpoint afresh"
        )

    def _open(self) -> bool:
        """Read the checkpoint and open the claim pools. The first attempt (in start()) raises
        ConfigError; later ones log it once and are tried again at the next poll."""
        try:
            if self._calls is None:
                self._preparer.open()
            else:
                # the endpoint is bound there
                self._paths.endpoint.parent.mkdir(parents=True, exist_ok=True)
                with self._calls.held():
                    self._preparer.open()
        except ConfigError as error:
            if self._thread is None:
                raise
            if str(error) != self._open_problem:
                log.error("%s: cannot read the checkpoint: %s", self.driver_name, error)
            self._open_problem = str(error)
            return False
        self._open_problem = ""
        if self._on_open is not None:
            try:
                self._on_open()
            # what the helper does on open (publish, clean up) must not keep claims unserved
            except Exception:
                log.exception(
                    "%s: the work after reading the checkpoint failed; serving anyway",
                    self.driver_name,
                )
        self._offload.open()
        self._opened = True
        return True

    def _own_instance(self) -> bool:
        """We hold the instance lock (taken now if free). Lost while serving (its file removed and
        locked afresh by a newcomer): the sockets are withdrawn for good, since what we hold may be
        stale by now."""
        if self._lost:
            return False
        was_open = self._opened
        try:
            if self._instance.try_acquire():
                self._lock_problem = ""
                return True
        # e.g. a file where plugins/ was: the sockets could not be bound either
        except OSError as error:
            problem = (
                f"cannot take the instance lock {self._instance.path}: {describe_os_error(error)}"
            )
            if problem != self._lock_problem:
                log.error("%s: %s", self.driver_name, problem)
            self._lock_problem = problem
            return False
        # another instance holds the fresh lock file now: it reads the checkpoint afresh
        if was_open:
            self._lost = True
            log.error(
                "%s: %s was locked afresh by another instance; withdrawing our sockets",
                self.driver_name,
                self._instance.path,
            )
            self._registrar.stop(0.0, problem="withdrawn: another instance took the instance lock")
            self._endpoint.stop(0.0, problem="withdrawn: another instance took the instance lock")
        return False
