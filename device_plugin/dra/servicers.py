"""The kubelet-facing gRPC servicers of the DRA driver, for grpc.aio: DRAPlugin (v1, v1beta1) and Registration.

Boundary: translates protobuf messages to Preparer calls and back, nothing more. They run on the
process's one serving loop (device_plugin.serving.event_loop), which must never block: the Preparer
is synchronous and may wait on the API server, so its calls run in an Offload's thread pools, and
Unprepare has its own pool, so it never queues behind slow Prepares. A request without claims is
answered on the loop (the liveness probe sends one). A Preparer that raises becomes INTERNAL with a
bounded message; per-claim problems are per-claim errors in the response, as the kubelet expects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any, NoReturn, TypeVar

import grpc

from api import dra_v1_pb2, dra_v1_pb2_grpc, dra_v1beta1_pb2, dra_v1beta1_pb2_grpc
from api import pluginregistration_pb2 as reg_pb2
from api import pluginregistration_pb2_grpc as reg_grpc
from device_plugin.core.short_text import bounded_text
from device_plugin.dra.prepare import ClaimRef, Preparer

log = logging.getLogger(__name__)

T = TypeVar("T")

PLUGIN_TYPE = "DRAPlugin"
SERVED = ((dra_v1_pb2, dra_v1_pb2_grpc, "v1"), (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc, "v1beta1"))
SUPPORTED_VERSIONS = tuple(f"{version}.DRAPlugin" for _, _, version in SERVED)
PREPARE_WORKERS = 4  # Prepares in flight at once (each may wait on the API server)
UNPREPARE_WORKERS = 2  # its own pool: an Unprepare never waits for a Prepare's worker


class Offload:
    """The thread pools Preparer calls run in; opened at start, closed at stop (running calls finish)."""

    def __init__(self) -> None:
        self.prepare: ThreadPoolExecutor | None = None
        self.unprepare: ThreadPoolExecutor | None = None

    def open(self) -> None:
        self.close()
        self.prepare = ThreadPoolExecutor(PREPARE_WORKERS, thread_name_prefix="dra-prepare")
        self.unprepare = ThreadPoolExecutor(UNPREPARE_WORKERS, thread_name_prefix="dra-unprepare")

    def close(self) -> None:
        for pool in (self.prepare, self.unprepare):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self.prepare = self.unprepare = None


def _claims(request: Any) -> list[ClaimRef]:
    return [ClaimRef(c.namespace, c.uid, c.name) for c in request.claims]


async def _abort(context: grpc.aio.ServicerContext, method: str, error: BaseException) -> NoReturn:
    log.error("%s failed: %s: %s", method, type(error).__name__, error, exc_info=error)
    await context.abort(
        grpc.StatusCode.INTERNAL, bounded_text(f"{method}: internal error: {type(error).__name__}: {error}")
    )
    raise AssertionError("unreachable: abort raises")


async def _off_loop(
    pool: ThreadPoolExecutor | None,
    call: Callable[[Sequence[ClaimRef]], T],
    claims: Sequence[ClaimRef],
    context: grpc.aio.ServicerContext,
    method: str,
) -> T:
    try:
        if pool is None:
            raise RuntimeError("the DRA driver is stopping")
        return await asyncio.get_running_loop().run_in_executor(pool, call, claims)
    except Exception as error:  # a Preparer bug or a stopped pool: the kubelet retries on INTERNAL
        await _abort(context, method, error)


def dra_servicer(pb: ModuleType, pb_grpc: ModuleType, preparer: Preparer, offload: Offload) -> Any:
    """The DRAPlugin servicer of one API version (`pb`, `pb_grpc`: its generated modules)."""

    class Servicer(pb_grpc.DRAPluginServicer):  # type: ignore[name-defined,misc]
        async def NodePrepareResources(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
            response = pb.NodePrepareResourcesResponse()
            claims = _claims(request)
            if not claims:
                return response
            results = await _off_loop(offload.prepare, preparer.prepare, claims, context, "NodePrepareResources")
            for uid, result in results.items():
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

        async def NodeUnprepareResources(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
            response = pb.NodeUnprepareResourcesResponse()
            claims = _claims(request)
            if not claims:
                return response
            errors = await _off_loop(offload.unprepare, preparer.unprepare, claims, context, "NodeUnprepareResources")
            for uid, error in errors.items():
                response.claims[uid].error = error
            return response

    return Servicer()


class Registration(reg_grpc.RegistrationServicer):  # type: ignore[misc]
    """What the kubelet's plugin watcher calls on the registration socket; `status` is its last word."""

    def __init__(self, driver_name: str, endpoint: str, on_registered: Callable[[], None] | None = None) -> None:
        self._driver = driver_name
        self._endpoint = endpoint
        self._on_registered = on_registered
        self.status: tuple[bool, str] | None = None  # what the kubelet last told us

    async def GetInfo(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return reg_pb2.PluginInfo(
            type=PLUGIN_TYPE, name=self._driver, endpoint=self._endpoint, supported_versions=SUPPORTED_VERSIONS
        )

    async def NotifyRegistrationStatus(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.status = (request.plugin_registered, request.error)
        if request.plugin_registered:
            log.info("DRA driver %s registered with the kubelet", self._driver)
            if self._on_registered is not None:  # a (re)started kubelet may have wiped our slices
                try:  # off the loop: the callback is not ours and may take a lock
                    await asyncio.get_running_loop().run_in_executor(None, self._on_registered)
                except Exception:
                    log.exception("the DRA driver's on-registered callback failed")
        else:
            log.error("the kubelet refused DRA driver %s: %s", self._driver, request.error)
        return reg_pb2.RegistrationStatusResponse()
