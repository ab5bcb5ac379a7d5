"""The gRPC DevicePlugin servicer for one resource, and the asyncio server that serves it on a
socket.

Serving model (issue 11): every plugin socket is served by a `grpc.aio` server on one process-wide
event loop thread (device_plugin.serving.event_loop). A ListAndWatch stream is a coroutine parked on
an asyncio event, not a thread, so no number of idle, slow or unread streams from any local client
can hold back Allocate or GetPreferredAllocation: unary handlers run on the loop as soon as they
arrive. They are short and CPU-bound, so they run inline (no thread hop on the kubelet's path). One
feeder thread per servicer waits on the ServedResource and wakes the streams when the device list
changes; each stream then sends a full snapshot. A handler that hangs would stop the loop: the
lifecycle's self-probe (GetDevicePluginOptions over the socket) notices it and /healthz reports it.

The servicer translates protobuf <-> domain and nothing more; every check lives in
device_plugin.allocation.request (called here for the message, by the ServedResource per container)
and every decision in the ServedResource. Domain errors become gRPC status codes in exactly one
place (status_for), with the message bounded, so no handler exception escapes into gRPC's machinery
and no request is echoed whole.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Protocol, TypeVar

import grpc

from api import deviceplugin_pb2 as pb
from api import deviceplugin_pb2_grpc as pb_grpc
from device_plugin.core.call_log import CallLog
from device_plugin.core.devices import ContainerAllocation, Device
from device_plugin.core.errors import InvalidRequestError, PluginError
from device_plugin.core.short_text import bounded_text
from device_plugin.dp_helper.served_resource import ServedResource, require_containers
from device_plugin.serving import event_loop
from device_plugin.serving.aio_server import AddServices

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long the feeder thread waits on the resource before re-checking that its servicer still
# serves.
FEED_POLL_S = 0.25

StreamEndedCallback = Callable[["DevicePluginServicer"], None]


class RpcObserver(Protocol):
    """Hears how each unary RPC ended (the metrics hook). Must not raise; errors are logged and
    dropped."""

    def rpc_finished(
        self, method: str, resource: str, code: str, duration_s: float, error: BaseException | None
    ) -> None: ...


_OPTIONS = (False, True)  # (pre_start_required, get_preferred_allocation_available)


def plugin_options() -> pb.DevicePluginOptions:
    """The options this plugin advertises; RegisterRequest and GetDevicePluginOptions both use
    it."""
    return pb.DevicePluginOptions(
        pre_start_required=_OPTIONS[0], get_preferred_allocation_available=_OPTIONS[1]
    )


def status_for(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The one mapping from domain errors to gRPC status codes; the message is bounded."""
    if isinstance(error, InvalidRequestError):
        return grpc.StatusCode.INVALID_ARGUMENT, bounded_text(str(error))
    if isinstance(error, PluginError):
        return grpc.StatusCode.INTERNAL, bounded_text(str(error))
    return grpc.StatusCode.INTERNAL, bounded_text(
        f"internal error: {type(error).__name__}: {error}"
    )


def devices_to_pb(devices: Sequence[Device]) -> list[pb.Device]:
    """Devices as the kubelet sees them. Topology is all-or-none (the kubelet's hint logic assumes
    it)."""
    with_topology = bool(devices) and all(
        d.numa_node is not None and d.numa_node >= 0 for d in devices
    )
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
            pb.DeviceSpec(
                container_path=s.container_path, host_path=s.host_path, permissions=s.permissions
            )
            for s in allocation.device_specs
        ],
        annotations=dict(allocation.annotations),
        cdi_devices=[pb.CDIDevice(name=name) for name in allocation.cdi_devices],
    )


class DevicePluginServicer(pb_grpc.DevicePluginServicer):
    """Serves one ServedResource on the serving loop. `on_stream_ended` hears of streams the client
    ended."""

    def __init__(
        self,
        resource: ServedResource,
        on_stream_ended: StreamEndedCallback | None = None,
        observer: RpcObserver | None = None,
    ) -> None:
        self.resource = resource
        self._on_stream_ended = on_stream_ended
        self._observer = observer
        # one INFO line per Allocate / GetPreferredAllocation, rate-limited
        self._calls = CallLog(log)
        # changed on the loop only; read from other threads (an int read is atomic)
        self._active_streams = 0
        self._shutting_down = threading.Event()
        self._changed: asyncio.Event | None = None  # replaced at every change; created on the loop
        self._feeder: threading.Thread | None = None

    @property
    def active_streams(self) -> int:
        return self._active_streams

    def shutdown(self) -> None:
        """Mark the server as going away: streams that end from now on were not ended by the
        kubelet."""
        self._shutting_down.set()
        event_loop.call_soon(self._wake_streams)

    # ---- change feed ---------------------------------------------------------------------------

    def _start_feeder(self) -> None:
        """On the loop, at the first stream: one thread per servicer waits on the resource for all
        streams."""
        if self._feeder is None:
            self._changed = asyncio.Event()
            # The version is read here, before the stream's first snapshot, not by the thread when
            # it runs: a change made before a late-starting thread's first look would otherwise wake
            # no stream.
            version = self.resource.snapshot().version
            name = f"feed-{self.resource.resource_name}"
            self._feeder = threading.Thread(
                target=self._feed, args=(version,), name=name, daemon=True
            )
            self._feeder.start()

    def _feed(self, version: int) -> None:
        while not self._shutting_down.is_set():
            latest = self.resource.wait_for_change(version, FEED_POLL_S)
            if latest.version != version:
                version = latest.version
                event_loop.call_soon(self._wake_streams)
            if latest.closed:
                return  # the streams send the empty list and end; nothing changes after a close

    def _wake_streams(self) -> None:
        if self._changed is not None:
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()

    # ---- unary plumbing ------------------------------------------------------------------------

    async def _call(
        self, rpc: str, context: grpc.aio.ServicerContext, handler: Callable[[], T]
    ) -> T:
        started = time.perf_counter()
        try:
            result = handler()
        except Exception as error:
            code, message = status_for(error)
            level = logging.INFO if code is grpc.StatusCode.INVALID_ARGUMENT else logging.ERROR
            log.log(
                level,
                "%s %s refused with %s: %s",
                self.resource.resource_name,
                rpc,
                code.name,
                message,
            )
            self._observe(rpc, code, started, error)
        else:
            if self._observer is not None:
                self._observe(rpc, grpc.StatusCode.OK, started, None)
            return result
        # raises; outside the except so the traceback stays small
        await context.abort(code, message)
        raise AssertionError("unreachable")  # pragma: no cover

    def _observe(
        self, rpc: str, code: grpc.StatusCode, started: float, error: BaseException | None
    ) -> None:
        if self._observer is None:
            return
        try:
            duration_s = time.perf_counter() - started
            self._observer.rpc_finished(
                rpc, self.resource.resource_name, code.name, duration_s, error
            )
        except Exception:  # a metrics bug must never fail an RPC
            log.exception("RPC observer failed for %s %s", self.resource.resource_name, rpc)

    # ---- RPCs ----------------------------------------------------------------------------------

    async def GetDevicePluginOptions(
        self, request: pb.Empty, context: grpc.aio.ServicerContext
    ) -> pb.DevicePluginOptions:
        return plugin_options()

    async def ListAndWatch(self, request: pb.Empty, context: grpc.aio.ServicerContext) -> None:
        name = self.resource.resource_name
        self._start_feeder()
        self._active_streams += 1
        # Any end we did not choose is the client's: gRPC cancels this coroutine (CancelledError at
        # an await) when the client goes away, so the decision is made in `finally`.
        ended_here = False
        try:
            snapshot = self.resource.snapshot()
            log.info(
                "%s ListAndWatch: sending %d devices (version %d)",
                name,
                len(snapshot.devices),
                snapshot.version,
            )
            await context.write(pb.ListAndWatchResponse(devices=devices_to_pb(snapshot.devices)))
            while not snapshot.closed:
                changed = self._changed
                latest = self.resource.snapshot()
                if latest.version == snapshot.version:
                    # Shutting down ends the stream only with nothing left to send: a stop closes
                    # the resource and then the server, and the empty list it closed with must go
                    # out first (under load the stream woke after both and ended without it).
                    if self._shutting_down.is_set():
                        ended_here = True
                        return
                    assert changed is not None
                    await changed.wait()  # the feeder or shutdown() sets it
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
                await context.write(
                    pb.ListAndWatchResponse(devices=devices_to_pb(snapshot.devices))
                )
            ended_here = True  # the resource closed: the empty list went out
        except Exception as error:  # a bug here must end this stream with a status, not the server
            ended_here = True
            code, message = status_for(error)
            log.error("%s ListAndWatch failed: %s", name, message)
            await context.abort(code, message)
        finally:
            self._active_streams -= 1
            if not ended_here and not self._shutting_down.is_set():
                log.warning("%s ListAndWatch: the kubelet ended the stream", name)
                if self._on_stream_ended is not None:
                    self._on_stream_ended(self)

    async def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: grpc.aio.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        started = time.perf_counter()
        response = await self._call(
            "GetPreferredAllocation", context, lambda: self._preferred(request)
        )
        chosen = (
            f"{c.allocation_size} of {len(c.available_deviceIDs)} available"
            + (
                f" (must include {','.join(c.must_include_deviceIDs)})"
                if c.must_include_deviceIDs
                else ""
            )
            + f" -> {','.join(r.deviceIDs)}"
            for c, r in zip(request.container_requests, response.container_responses, strict=True)
        )
        self._log_call("GetPreferredAllocation", "; ".join(chosen), started)
        return response

    def _preferred(self, request: pb.PreferredAllocationRequest) -> pb.PreferredAllocationResponse:
        require_containers(request.container_requests)
        response = pb.PreferredAllocationResponse()
        for container in request.container_requests:
            chosen = self.resource.preferred_allocation(
                container.available_deviceIDs,
                container.must_include_deviceIDs,
                container.allocation_size,
            )
            response.container_responses.add().deviceIDs.extend(chosen)
        return response

    async def Allocate(
        self, request: pb.AllocateRequest, context: grpc.aio.ServicerContext
    ) -> pb.AllocateResponse:
        def handle() -> pb.AllocateResponse:
            require_containers(request.container_requests)
            # Validate and build every answer before replying: one bad container fails the whole
            # call.
            allocations = [
                self.resource.allocate(list(c.devices_ids)) for c in request.container_requests
            ]
            return pb.AllocateResponse(
                container_responses=[allocation_to_pb(a) for a in allocations]
            )

        started = time.perf_counter()
        response = await self._call("Allocate", context, handle)
        allocated = (",".join(c.devices_ids) for c in request.container_requests)
        self._log_call("Allocate", "; ".join(allocated), started)
        return response

    def _log_call(self, rpc: str, what: str, started: float) -> None:
        """What the kubelet was handed, for an operator without DEBUG (the kubelet names no pod
        here)."""
        took_ms = (time.perf_counter() - started) * 1000
        self._calls.info("%s %s: %s in %.1f ms", self.resource.resource_name, rpc, what, took_ms)

    async def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: grpc.aio.ServicerContext
    ) -> pb.PreStartContainerResponse:
        # pre_start_required is false, so the kubelet never calls this; answering OK keeps old
        # callers happy.
        return pb.PreStartContainerResponse()


def services_of(servicer: DevicePluginServicer) -> AddServices:
    """What a socket serving `servicer` carries: the DevicePlugin service (serving/bound_socket.py
    binds it)."""
    return partial(pb_grpc.add_DevicePluginServicer_to_server, servicer)
