"""The gRPC DevicePlugin servicer for one resource: protobuf <-> domain translation, nothing more.

Every decision lives in the ResourceManager. This module turns requests into domain calls, domain
results into protobuf, and domain errors into gRPC status codes in exactly one place (status_for).
No handler exception can escape into gRPC's machinery: each one becomes a status with a message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TypeVar

import grpc

from api import deviceplugin_pb2 as pb
from api import deviceplugin_pb2_grpc as pb_grpc
from device_plugin.devices import ContainerAllocation, Device
from device_plugin.errors import InvalidRequestError, PluginError
from device_plugin.resources import ResourceManager

log = logging.getLogger(__name__)

T = TypeVar("T")

# How often a ListAndWatch stream re-checks whether its client or server went away while no change
# arrives. Bounds how long a stream thread outlives a stopped server.
STREAM_POLL_S = 0.25

StreamEndedCallback = Callable[["DevicePluginServicer"], None]


class RpcObserver(Protocol):
    """Hears how each unary RPC ended (the metrics hook). Must not raise; errors are logged and dropped."""

    def rpc_finished(
        self, method: str, resource: str, code: str, duration_s: float, error: BaseException | None
    ) -> None: ...


def plugin_options() -> pb.DevicePluginOptions:
    """The options this plugin advertises; RegisterRequest and GetDevicePluginOptions both use it."""
    return pb.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)


def status_for(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The one mapping from domain errors to gRPC status codes."""
    if isinstance(error, InvalidRequestError):
        return grpc.StatusCode.INVALID_ARGUMENT, str(error)
    if isinstance(error, PluginError):
        return grpc.StatusCode.INTERNAL, str(error)
    return grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}: {error}"


def devices_to_pb(devices: Sequence[Device]) -> list[pb.Device]:
    """Devices as the kubelet sees them. Topology is all-or-none (the kubelet's hint logic assumes it)."""
    with_topology = bool(devices) and all(d.numa_node is not None and d.numa_node >= 0 for d in devices)
    result = []
    for device in devices:
        message = pb.Device(ID=device.id, health=device.health.value)
        if with_topology:
            message.topology.nodes.append(pb.NUMANode(ID=device.numa_node))
        result.append(message)
    return result


def allocation_to_pb(allocation: ContainerAllocation) -> pb.ContainerAllocateResponse:
    return pb.ContainerAllocateResponse(
        envs=dict(allocation.envs),
        mounts=[
            pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in allocation.mounts
        ],
        devices=[
            pb.DeviceSpec(container_path=s.container_path, host_path=s.host_path, permissions=s.permissions)
            for s in allocation.device_specs
        ],
        annotations=dict(allocation.annotations),
        cdi_devices=[pb.CDIDevice(name=name) for name in allocation.cdi_devices],
    )


class DevicePluginServicer(pb_grpc.DevicePluginServicer):
    """Serves one ResourceManager. `on_stream_ended` hears of streams the client (kubelet) ended."""

    def __init__(
        self,
        resource: ResourceManager,
        on_stream_ended: StreamEndedCallback | None = None,
        observer: RpcObserver | None = None,
    ) -> None:
        self.resource = resource
        self._on_stream_ended = on_stream_ended
        self._observer = observer
        self._lock = threading.Lock()
        self._active_streams = 0
        self._shutting_down = threading.Event()

    @property
    def active_streams(self) -> int:
        with self._lock:
            return self._active_streams

    def shutdown(self) -> None:
        """Mark the server as going away: streams that end from now on were not ended by the kubelet."""
        self._shutting_down.set()

    def _call(self, rpc: str, context: grpc.ServicerContext, handler: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            result = handler()
        except Exception as error:
            code, message = status_for(error)
            level = logging.INFO if code is grpc.StatusCode.INVALID_ARGUMENT else logging.ERROR
            log.log(level, "%s %s refused with %s: %s", self.resource.resource_name, rpc, code.name, message)
            self._observe(rpc, code, started, error)
        else:
            self._observe(rpc, grpc.StatusCode.OK, started, None)
            return result
        context.abort(code, message)  # raises; outside the except so the traceback stays small
        raise AssertionError("unreachable")  # pragma: no cover

    def _observe(self, rpc: str, code: grpc.StatusCode, started: float, error: BaseException | None) -> None:
        if self._observer is None:
            return
        try:
            duration_s = time.perf_counter() - started
            self._observer.rpc_finished(rpc, self.resource.resource_name, code.name, duration_s, error)
        except Exception:  # a metrics bug must never fail an RPC
            log.exception("RPC observer failed for %s %s", self.resource.resource_name, rpc)

    # ---- RPCs ----------------------------------------------------------------------------------

    def GetDevicePluginOptions(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.DevicePluginOptions:
        return plugin_options()

    def ListAndWatch(self, request: pb.Empty, context: grpc.ServicerContext) -> Iterator[pb.ListAndWatchResponse]:
        name = self.resource.resource_name
        with self._lock:
            self._active_streams += 1
        # Any end we did not choose is the client's: it went inactive while we waited, or it cancelled
        # while a message was in flight, in which case gRPC drops this generator and closes it at the
        # `yield` (GeneratorExit), so no line after the yield runs. Hence decided here, not there.
        ended_here = False
        try:
            snapshot = self.resource.snapshot()
            log.info("%s ListAndWatch: sending %d devices (version %d)", name, len(snapshot.devices), snapshot.version)
            yield pb.ListAndWatchResponse(devices=devices_to_pb(snapshot.devices))
            while not snapshot.closed:
                if not context.is_active():
                    return
                if self._shutting_down.is_set():
                    ended_here = True
                    return
                latest = self.resource.wait_for_change(snapshot.version, STREAM_POLL_S)
                if latest.version == snapshot.version:
                    continue
                snapshot = latest
                unhealthy = [d.id for d in snapshot.devices if not d.healthy]
                log.info(
                    "%s ListAndWatch: sending %d devices (version %d%s), unhealthy: %s",
                    name,
                    len(snapshot.devices),
                    snapshot.version,
                    ", resource closed" if snapshot.closed else "",
                    ",".join(unhealthy) or "none",
                )
                yield pb.ListAndWatchResponse(devices=devices_to_pb(snapshot.devices))
            ended_here = True  # the resource closed: the empty list went out
        except Exception as error:  # a bug here must end this stream with a status, not the server
            ended_here = True
            code, message = status_for(error)
            log.error("%s ListAndWatch failed: %s", name, message)
            context.abort(code, message)
        finally:
            with self._lock:
                self._active_streams -= 1
            if not ended_here and not self._shutting_down.is_set():
                log.warning("%s ListAndWatch: the kubelet ended the stream", name)
                if self._on_stream_ended is not None:
                    self._on_stream_ended(self)

    def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        def handle() -> pb.PreferredAllocationResponse:
            if not request.container_requests:
                raise InvalidRequestError("container_requests is empty")
            responses = []
            for container in request.container_requests:
                chosen = self.resource.preferred_allocation(
                    list(container.available_deviceIDs),
                    list(container.must_include_deviceIDs),
                    container.allocation_size,
                )
                responses.append(pb.ContainerPreferredAllocationResponse(deviceIDs=list(chosen)))
            return pb.PreferredAllocationResponse(container_responses=responses)

        return self._call("GetPreferredAllocation", context, handle)

    def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        def handle() -> pb.AllocateResponse:
            if not request.container_requests:
                raise InvalidRequestError("container_requests is empty")
            # Validate and build every answer before replying: one bad container fails the whole call.
            allocations = [self.resource.allocate(list(c.devices_ids)) for c in request.container_requests]
            return pb.AllocateResponse(container_responses=[allocation_to_pb(a) for a in allocations])

        return self._call("Allocate", context, handle)

    def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        # pre_start_required is false, so the kubelet never calls this; answering OK keeps old callers happy.
        return pb.PreStartContainerResponse()
