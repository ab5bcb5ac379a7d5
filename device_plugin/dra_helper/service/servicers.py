"""The kubelet-facing gRPC servicers of the DRA driver, for grpc.aio: DRAPlugin (v1, v1beta1) and
Registration (DRAResourceHealth is dra_helper/service/health_service.py's).

Boundary: translates protobuf messages to Preparer calls and back, nothing more. They run on the
process's one serving loop (device_plugin.serving.event_loop), which must never block: the Preparer
may block, so its blocking work runs in the Offload's pools (service/offload.py): each claim of a
Prepare is read on the loop (the ClaimFetcher: the API server, ApiClaimFetcher in
claims/api_read.py) and then settled (decided, checkpointed) in a prepare worker; the claims of a
call are read concurrently. A whole Unprepare is one task of its own pool, so it never queues behind
Prepares. A request without claims is answered on the loop (the liveness probe sends one). Every
claim of a request is answered: a claim whose task failed gets that failure as its error. Only a
stopped driver fails a whole call (INTERNAL, bounded message). When the kubelet gives up on a
Prepare (its deadline, a cancel), the claims still running write nothing and the queued ones are not
started.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from types import ModuleType
from typing import Any, NoReturn

import grpc

from api import dra_v1_pb2, dra_v1_pb2_grpc, dra_v1beta1_pb2, dra_v1beta1_pb2_grpc
from api import pluginregistration_pb2 as reg_pb2
from api import pluginregistration_pb2_grpc as reg_grpc
from device_plugin.core.call_log import CallLog
from device_plugin.core.short_text import bounded_text, one_line
from device_plugin.dra_helper.checkpoint.values import PreparedDevice
from device_plugin.dra_helper.claims.prepare import (
    ERROR_CHARS,
    ClaimRef,
    Preparer,
    PrepareResult,
    claim_label,
)
from device_plugin.dra_helper.service.offload import PREPARE_WORKERS, UNPREPARE_WORKERS, Offload

__all__ = [
    "PREPARE_WORKERS",
    "SERVED",
    "SUPPORTED_VERSIONS",
    "UNPREPARE_WORKERS",
    "Registration",
    "dra_servicer",
]

log = logging.getLogger(__name__)

PLUGIN_TYPE = "DRAPlugin"
SERVED = ((dra_v1_pb2, dra_v1_pb2_grpc, "v1"), (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc, "v1beta1"))
SUPPORTED_VERSIONS = tuple(f"{version}.DRAPlugin" for _, _, version in SERVED)


def _claims(request: Any) -> list[ClaimRef]:
    """The request's claims, one per UID (the first of repeats): the answer is a map by UID."""
    unique: dict[str, ClaimRef] = {}
    for c in request.claims:
        unique.setdefault(c.uid, ClaimRef(c.namespace, c.uid, c.name))
    return list(unique.values())


async def _abort(context: grpc.aio.ServicerContext, method: str, error: BaseException) -> NoReturn:
    log.error("%s failed: %s: %s", method, type(error).__name__, error, exc_info=error)
    await context.abort(
        grpc.StatusCode.INTERNAL,
        bounded_text(f"{method}: internal error: {type(error).__name__}: {error}"),
    )
    raise AssertionError("unreachable: abort raises")


def _caller_gone(
    context: grpc.aio.ServicerContext, cancelled: threading.Event
) -> Callable[[], bool]:
    """True once the call was cancelled or its deadline passed (checked from the worker threads)."""
    remaining = context.time_remaining()
    deadline = None if remaining is None else time.monotonic() + remaining
    return lambda: cancelled.is_set() or (deadline is not None and time.monotonic() > deadline)


async def _settled(work: Awaitable[PrepareResult]) -> PrepareResult | BaseException:
    """`work`'s result or exception, as gather(return_exceptions=True) gives it, without gather's
    task and future (~40 us of loop time a call): only the cancellation of this call itself
    propagates."""
    try:
        return await work
    except asyncio.CancelledError as error:
        task = asyncio.current_task()
        # the kubelet left (or the server stops): not the claim's
        if task is not None and task.cancelling():
            raise
        # the work alone was cancelled (its pool closed): that claim's error, as gather says
        return error
    except Exception as error:
        return error


def _failed(claim: ClaimRef, error: BaseException) -> PrepareResult:
    label = claim_label(claim.namespace, claim.name, claim.uid)
    return PrepareResult(
        error=one_line(f"{label}: not prepared: {type(error).__name__}: {error}", ERROR_CHARS)
    )


async def _prepare_one(
    preparer: Preparer, offload: Offload, claim: ClaimRef, gone: Callable[[], bool]
) -> PrepareResult:
    """Read on the loop, then settle in a worker; the claim's ticket
    is held from before the read until the settle is over, or will never run."""
    what = f"NodePrepareResources of {claim_label(claim.namespace, claim.name, claim.uid)}"
    ticket = preparer.ticket(claim.uid)
    try:
        # the kubelet left before this claim's turn: no API read for an answer nobody waits for
        if gone():
            read = None
        else:
            read = await preparer.fetch(claim)
    except BaseException:
        ticket.release()
        raise
    return await offload.prepare(
        what, partial(preparer.settle, claim, ticket, read, gone), after=ticket.release
    )


def _log_call(
    calls: CallLog,
    method: str,
    claims: list[ClaimRef],
    results: list[PrepareResult],
    started: float,
) -> None:
    """Who asked (the claims), what they got (pool/device, or "failed": the warning below says why),
    how long."""
    took_ms = (time.perf_counter() - started) * 1000
    parts = []
    for claim, result in zip(claims, results, strict=True):
        label = f"{one_line(claim.namespace, 64)}/{one_line(claim.name, 64)}"
        if result.error:
            parts.append(f"{label} failed")
        elif method == "NodePrepareResources":
            parts.append(f"{label} -> {','.join(_held_as(d) for d in result.devices) or 'none'}")
        else:
            parts.append(f"{label} released")
    calls.info("%s: %s in %.1f ms", method, "; ".join(parts), took_ms)


def _held_as(device: PreparedDevice) -> str:
    """pool/device, and for a share its size and ID: "vm/gpu-0 (share 20480 of 81559 MiB, <id>)"."""
    share = device.share
    if share is None:
        return f"{device.pool_name}/{device.device_name}"
    size = f"share {share.memory_mib} of {share.of_mib} MiB, {one_line(share.share_id, 64)}"
    return f"{device.pool_name}/{device.device_name} ({size})"


def _add_devices(entry: Any, devices: Sequence[PreparedDevice], carries_shares: bool) -> None:
    """The prepared devices into one claim's answer; a share's ID where the API version has the
    field (v1; v1beta1 has none, and no API server that serves only v1beta1 allocates shares)."""
    for d in devices:
        device = entry.devices.add(
            request_names=d.request_names,
            pool_name=d.pool_name,
            device_name=d.device_name,
            cdi_device_ids=d.cdi_device_ids,
        )
        if d.share is not None and carries_shares:
            device.share_id = d.share.share_id


def dra_servicer(pb: ModuleType, pb_grpc: ModuleType, preparer: Preparer, offload: Offload) -> Any:
    """The DRAPlugin servicer of one API version (`pb`, `pb_grpc`: its generated modules)."""
    carries_shares = "share_id" in pb.Device.DESCRIPTOR.fields_by_name
    # one INFO line per call that prepared or unprepared something, rate-limited
    calls = CallLog(log)

    async def prepare_all(
        claims: list[ClaimRef], context: grpc.aio.ServicerContext
    ) -> list[PrepareResult]:
        cancelled = threading.Event()
        gone = _caller_gone(context, cancelled)
        tasks = [_prepare_one(preparer, offload, c, gone) for c in claims]
        try:
            # the kubelet's usual call: awaited here, not wrapped in a task and a gather
            if len(tasks) == 1:
                outcomes: list[Any] = [await _settled(tasks[0])]
            else:
                outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        except asyncio.CancelledError:  # the kubelet left: running claims must not write
            cancelled.set()
            raise
        return [
            o if isinstance(o, PrepareResult) else _failed(c, o)
            for c, o in zip(claims, outcomes, strict=True)
        ]

    class Servicer(pb_grpc.DRAPluginServicer):  # type: ignore[name-defined,misc]
        async def NodePrepareResources(
            self, request: Any, context: grpc.aio.ServicerContext
        ) -> Any:
            response = pb.NodePrepareResourcesResponse()
            claims = _claims(request)
            if not claims:
                return response
            if not offload.running():
                not_serving = RuntimeError(
                    "the DRA driver is not serving claims (starting or stopping)"
                )
                await _abort(context, "NodePrepareResources", not_serving)
            started = time.perf_counter()
            results = await prepare_all(claims, context)
            _log_call(calls, "NodePrepareResources", claims, results, started)
            for claim, result in zip(claims, results, strict=True):
                entry = response.claims[claim.uid]
                entry.error = result.error
                _add_devices(entry, result.devices, carries_shares)
                if result.error:
                    log.warning("NodePrepareResources: %s", result.error)
            return response

        async def NodeUnprepareResources(
            self, request: Any, context: grpc.aio.ServicerContext
        ) -> Any:
            response = pb.NodeUnprepareResourcesResponse()
            claims = _claims(request)
            if not claims:
                return response
            started = time.perf_counter()
            try:
                errors = await offload.unprepare(
                    "NodeUnprepareResources", lambda: preparer.unprepare(claims)
                )
            # a stopped pool or a bug of ours: the kubelet retries on INTERNAL
            except Exception as failure:
                await _abort(context, "NodeUnprepareResources", failure)
            unprepared = [PrepareResult(error=errors.get(c.uid, "")) for c in claims]
            _log_call(calls, "NodeUnprepareResources", claims, unprepared, started)
            for uid, error in errors.items():
                response.claims[uid].error = error
                if error:
                    log.warning("NodeUnprepareResources: %s", error)
            return response

    return Servicer()


class Registration(reg_grpc.RegistrationServicer):  # type: ignore[misc]
    """What the kubelet's plugin watcher calls on the registration socket; `status` is its last
    word."""

    def __init__(
        self,
        driver_name: str,
        endpoint: str,
        on_registered: Callable[[], None] | None = None,
        supported_versions: tuple[str, ...] = SUPPORTED_VERSIONS,
    ) -> None:
        self._driver = driver_name
        self._endpoint = endpoint
        self._on_registered = on_registered
        # every service the endpoint serves, "<package>.<service>"
        self.supported_versions = supported_versions
        self.status: tuple[bool, str] | None = None  # what the kubelet last told us

    async def GetInfo(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return reg_pb2.PluginInfo(
            type=PLUGIN_TYPE,
            name=self._driver,
            endpoint=self._endpoint,
            supported_versions=self.supported_versions,
        )

    async def NotifyRegistrationStatus(
        self, request: Any, context: grpc.aio.ServicerContext
    ) -> Any:
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
