"""The DRA driver's two kubelet sockets, served and kept: the DRAPlugin endpoint and the registration socket.

Boundary: where the sockets go and keeping them there; the servicers (kubelet_plugin/service/servicers.py) do the
talking, device_plugin.serving does the binding. `<kubelet>/plugins_registry/<driver>-reg.sock` is
where the kubelet's plugin watcher finds us (it calls GetInfo); `<kubelet>/plugins/<driver>/dra.sock`
is the endpoint GetInfo names. GetInfo lists every served version as "<proto package>.DRAPlugin", and
"<package>.DRAResourceHealth" for the device-health service (service/health_service.py) served on the same
endpoint when the driver hands a DeviceHealthFeed.

Both are served by grpc.aio on the process's one serving loop, bound 0600 whatever the umask. A
foreign file at either path is refused and left untouched (logged; serving() says so); a path another
process serves is waited for, not bound over (serving/taken_socket.py; socket_taken() says so). A thread
looks every `poll_s`: a socket (or its folder) that was removed is served afresh, the endpoint
first; the registration socket reappearing makes the kubelet register us again, so its `status` is
forgotten then. The registration socket is served only while the endpoint is: the kubelet must not
be sent to an endpoint we cannot serve. stop() removes only sockets that are still ours.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import grpc

from api import dra_v1_pb2, dra_v1_pb2_grpc
from api import pluginregistration_pb2 as reg_pb2
from api import pluginregistration_pb2_grpc as reg_grpc
from device_plugin.core.errors import ConfigError
from device_plugin.kubelet_plugin.claims.prepare import Preparer
from device_plugin.kubelet_plugin.service.device_health import DeviceHealthFeed
from device_plugin.kubelet_plugin.service.health_service import HEALTH_VERSIONS, HEARTBEAT_S, add_health_servicers
from device_plugin.kubelet_plugin.service.offload import WEDGED_AFTER_S, Offload
from device_plugin.kubelet_plugin.service.servicers import SERVED, SUPPORTED_VERSIONS, Registration, dra_servicer
from device_plugin.serving.kept_socket import KeptSocket
from device_plugin.serving.probe import SocketProbe
from device_plugin.serving.socket_files import too_long

__all__ = ["SUPPORTED_VERSIONS", "DraGrpcServer", "SocketPaths", "check_socket_paths"]

log = logging.getLogger(__name__)

KEEP_POLL_S = 0.5  # how often the sockets are looked at (a removed one is back within this)
PROBE_TIMEOUT_S = 1.0  # a server slower than this to answer the liveness probe is not answering
PROBE_MAX_AGE_S = 0.5  # /healthz storms reuse one probe answer this long
DRIVER_NAME_FIELD = "gpuDevicePlugin.driverName"


@dataclass(frozen=True)
class SocketPaths:
    registration: Path
    endpoint: Path

    @classmethod
    def for_driver(cls, driver_name: str, kubelet_dir: Path = Path("/var/lib/kubelet")) -> SocketPaths:
        return cls(
            kubelet_dir / "plugins_registry" / f"{driver_name}-reg.sock",
            kubelet_dir / "plugins" / driver_name / "dra.sock",
        )


def check_socket_paths(driver_name: str, paths: SocketPaths) -> None:
    """ConfigError naming driverName and the kubelet directory when a socket path is too long to bind."""
    kubelet_dir = paths.registration.parent.parent
    for path in (paths.endpoint, paths.registration):
        reason = too_long(path)
        if reason is not None:
            raise ConfigError(
                DRIVER_NAME_FIELD,
                f"{reason}; shorten driverName {driver_name!r} ({len(os.fsencode(driver_name))} bytes) "
                f"or the kubelet directory {kubelet_dir} (the parent of devicePluginDir)",
            )


def _get_info(channel: grpc.Channel, timeout_s: float) -> object:
    return reg_grpc.RegistrationStub(channel).GetInfo(reg_pb2.InfoRequest(), timeout=timeout_s)


def _empty_unprepare(channel: grpc.Channel, timeout_s: float) -> object:
    request = dra_v1_pb2.NodeUnprepareResourcesRequest()  # no claims: answered on the loop, no Preparer call
    return dra_v1_pb2_grpc.DRAPluginStub(channel).NodeUnprepareResources(request, timeout=timeout_s)


class DraGrpcServer:
    """Both sockets; start() serves them and keeps them served, stop() removes them (the kubelet deregisters)."""

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
    ) -> None:
        self.driver_name = driver_name
        self._paths = paths
        self._poll_s = poll_s
        served = SUPPORTED_VERSIONS + (HEALTH_VERSIONS if health is not None else ())
        self.registration = Registration(driver_name, str(paths.endpoint), on_registered, served)
        self._offload = Offload(wedged_after_s=wedged_after_s)
        versions = [(pb_grpc, dra_servicer(pb, pb_grpc, preparer, self._offload)) for pb, pb_grpc, _ in SERVED]

        def add_dra(server: grpc.aio.Server) -> None:
            for pb_grpc, servicer in versions:
                pb_grpc.add_DRAPluginServicer_to_server(servicer, server)
            if health is not None:
                add_health_servicers(server, health, health_heartbeat_s)

        add_registration = partial(reg_grpc.add_RegistrationServicer_to_server, self.registration)
        taken_by = (  # who else serves our paths, when one does (the one ERROR names them)
            f"NVIDIA's DRA driver for GPUs, or a second copy of this driver, with driver name {driver_name}",
            "Run one DRA driver per driver name on a node, or set another gpuDevicePlugin.driverName.",
        )
        self._endpoint = KeptSocket(paths.endpoint, f"DRA driver {driver_name}", add_dra, taken_by=taken_by)
        self._registrar = KeptSocket(
            paths.registration, f"DRA registration {driver_name}", add_registration, taken_by=taken_by
        )
        self._probe = SocketProbe(PROBE_TIMEOUT_S, PROBE_MAX_AGE_S)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Serve both sockets now (the endpoint first) and keep them served. ConfigError: a path too long."""
        check_socket_paths(self.driver_name, self._paths)
        self._offload.open()
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

    @property
    def paths(self) -> SocketPaths:
        return self._paths

    def socket_taken(self) -> str:
        """Why we wait instead of serving: another process serves one of our paths; "" when none does."""
        return self._endpoint.taken() or self._registrar.taken()

    def serving(self) -> tuple[bool, str]:
        """Liveness: both sockets are ours, at their paths, and answer (GetInfo; an empty Unprepare), and no
        Prepare or Unprepare work has been stuck past the offload's limit."""
        if self._thread is None or not self._thread.is_alive():
            return False, f"the DRA sockets of {self.driver_name} are not kept (not started, or stopped)"
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
            except Exception:  # the keeper must outlive a surprise; serving() reports what it left undone
                log.exception("keeping the DRA sockets of %s failed; trying again", self.driver_name)

    def _keep(self) -> None:
        self._endpoint.keep()
        if not self._endpoint.intact():
            if self._registrar.intact():
                log.warning(
                    "%s: withdrawing the registration socket while the endpoint is not served", self.driver_name
                )
            self._registrar.stop(0.0, problem="not registering while the DRA endpoint is not served")
            return
        if self._registrar.keep():
            self.registration.status = None  # a fresh socket: the kubelet registers us anew
