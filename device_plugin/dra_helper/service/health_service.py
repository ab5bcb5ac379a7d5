"""The DRAResourceHealth service (KEP-4680; v1 and v1alpha1) for grpc.aio: device health for pod
status.

Boundary: turns the DeviceHealthFeed (service/device_health.py) into NodeWatchResources streams,
nothing more; what the health is comes from the runtime's one health delivery through the front-end.
The kubelet opens one stream per registration and shows the health in the status of pods whose
claims hold the devices (`containerStatuses[].allocatedResourcesStatus`). Each stream sends the
complete list of our devices at once, again whenever it changes, and again every HEARTBEAT_S: the
kubelet makes a device Unknown when it hears nothing of it for the timeout each device carries
(HEALTH_TIMEOUT_S). A stream runs until the kubelet goes away or the server stops (grpc.aio cancels
it). More than MAX_WATCHERS streams at once are refused with RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

import grpc

from api import (
    dra_health_v1_pb2,
    dra_health_v1_pb2_grpc,
    dra_health_v1alpha1_pb2,
    dra_health_v1alpha1_pb2_grpc,
)
from device_plugin.dra_helper.service.device_health import DeviceHealthFeed, TooManyWatchers

log = logging.getLogger(__name__)

HEARTBEAT_S = 10.0
HEALTH_TIMEOUT_S = 30  # told to the kubelet per device: three heartbeats may be lost before Unknown
HEALTH_SERVED = (
    (dra_health_v1_pb2, dra_health_v1_pb2_grpc, "v1"),
    (dra_health_v1alpha1_pb2, dra_health_v1alpha1_pb2_grpc, "v1alpha1"),
)
HEALTH_VERSIONS = tuple(f"{version}.DRAResourceHealth" for _, _, version in HEALTH_SERVED)


def watch_response(pb: ModuleType, feed: DeviceHealthFeed, now_unix_s: float) -> Any:
    """The complete list as one NodeWatchResourcesResponse of API version `pb`."""
    response = pb.NodeWatchResourcesResponse()
    for report in feed.reports():
        entry = response.devices.add(
            health=report.status.value,
            last_updated_time=int(now_unix_s),
            health_check_timeout_seconds=HEALTH_TIMEOUT_S,
            message=report.message,
        )
        entry.device.pool_name = feed.pool_name
        entry.device.device_name = report.device_name
    return response


def health_servicer(
    pb: ModuleType, pb_grpc: ModuleType, feed: DeviceHealthFeed, heartbeat_s: float
) -> Any:
    """The DRAResourceHealth servicer of one API version (`pb`, `pb_grpc`: its generated
    modules)."""

    class Servicer(pb_grpc.DRAResourceHealthServicer):  # type: ignore[name-defined,misc]
        async def NodeWatchResources(
            self, request: Any, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            try:
                with feed.watching() as watcher:
                    log.info("a kubelet watches device health (%s)", pb.DESCRIPTOR.package)
                    while True:
                        yield watch_response(pb, feed, time.time())
                        await watcher.next_change(heartbeat_s)
            except TooManyWatchers as error:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(error))

    return Servicer()


def add_health_servicers(
    server: grpc.aio.Server, feed: DeviceHealthFeed, heartbeat_s: float = HEARTBEAT_S
) -> None:
    for pb, pb_grpc, _ in HEALTH_SERVED:
        pb_grpc.add_DRAResourceHealthServicer_to_server(
            health_servicer(pb, pb_grpc, feed, heartbeat_s), server
        )
