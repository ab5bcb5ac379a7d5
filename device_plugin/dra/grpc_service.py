"""The kubelet-facing gRPC side: the DRAPlugin service (v1 and v1beta1) and the Registration service.

Boundary: translates protobuf messages to Preparer calls and back; owns the two unix sockets:
`<plugins_registry>/<driver>-reg.sock` (the kubelet's plugin watcher finds it there and calls
GetInfo) and `<plugins>/<driver>/dra.sock` (the endpoint GetInfo names). GetInfo lists every served
version as "<proto package last element>.DRAPlugin"; the kubelet picks the newest it knows.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc

from api import dra_v1_pb2, dra_v1_pb2_grpc, dra_v1beta1_pb2, dra_v1beta1_pb2_grpc
from api import pluginregistration_pb2 as reg_pb2
from api import pluginregistration_pb2_grpc as reg_grpc
from device_plugin.dra.prepare import ClaimRef, Preparer

log = logging.getLogger(__name__)

PLUGIN_TYPE = "DRAPlugin"
SERVED = ((dra_v1_pb2, dra_v1_pb2_grpc, "v1"), (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc, "v1beta1"))
SUPPORTED_VERSIONS = tuple(f"{version}.DRAPlugin" for _, _, version in SERVED)


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


def _claims(request: Any) -> list[ClaimRef]:
    return [ClaimRef(c.namespace, c.uid, c.name) for c in request.claims]


def _dra_servicer(pb: ModuleType, pb_grpc: ModuleType, preparer: Preparer) -> Any:
    class Servicer(pb_grpc.DRAPluginServicer):  # type: ignore[name-defined,misc]
        def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
            response = pb.NodePrepareResourcesResponse()
            for uid, result in preparer.prepare(_claims(request)).items():
                entry = response.claims[uid]
                entry.error = result.error
                for d in result.devices:
                    entry.devices.add(
                        request_names=d.request_names,
                        pool_name=d.pool_name,
                        device_name=d.device_name,
                        cdi_device_ids=d.cdi_device_ids,
                    )
                if result.error:
                    log.warning("NodePrepareResources: %s", result.error)
            return response

        def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
            response = pb.NodeUnprepareResourcesResponse()
            for uid, error in preparer.unprepare(_claims(request)).items():
                response.claims[uid].error = error
            return response

    return Servicer()


class _Registration(reg_grpc.RegistrationServicer):
    def __init__(self, driver_name: str, endpoint: Path, on_registered: Callable[[], None] | None = None) -> None:
        self._driver = driver_name
        self._endpoint = endpoint
        self._on_registered = on_registered
        self.status: tuple[bool, str] | None = None  # what the kubelet last told us

    def GetInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        return reg_pb2.PluginInfo(
            type=PLUGIN_TYPE, name=self._driver, endpoint=str(self._endpoint), supported_versions=SUPPORTED_VERSIONS
        )

    def NotifyRegistrationStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.status = (request.plugin_registered, request.error)
        if request.plugin_registered:
            log.info("DRA driver %s registered with the kubelet", self._driver)
            if self._on_registered is not None:  # a (re)started kubelet may have wiped our slices
                self._on_registered()
        else:
            log.error("the kubelet refused DRA driver %s: %s", self._driver, request.error)
        return reg_pb2.RegistrationStatusResponse()


class DraGrpcServer:
    """Both sockets; start() binds them (removing stale files), stop() removes them (the kubelet deregisters)."""

    def __init__(
        self,
        driver_name: str,
        paths: SocketPaths,
        preparer: Preparer,
        on_registered: Callable[[], None] | None = None,
    ) -> None:
        self._paths = paths
        self.registration = _Registration(driver_name, paths.endpoint, on_registered)
        self._dra = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        for pb, pb_grpc, _ in SERVED:
            pb_grpc.add_DRAPluginServicer_to_server(_dra_servicer(pb, pb_grpc, preparer), self._dra)
        self._reg = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        reg_grpc.add_RegistrationServicer_to_server(self.registration, self._reg)

    def start(self) -> None:
        # The DRA endpoint first: the kubelet may call it as soon as the registration socket appears.
        for server, path in ((self._dra, self._paths.endpoint), (self._reg, self._paths.registration)):
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists():
                os.unlink(path)
            server.add_insecure_port(f"unix://{path}")
            server.start()

    def stop(self, grace_s: float = 1.0) -> None:
        for server, path in ((self._reg, self._paths.registration), (self._dra, self._paths.endpoint)):
            server.stop(grace_s).wait()
            path.unlink(missing_ok=True)
