"""Allocate for time-sliced replicas: refuse what the config forbids, then delegate the response.

Boundary: a ResponseBuilder wrapper over value types. The wrapped builder (device_plugin's envvar,
volume-mounts or CDI builders) must name devices through allocation_policy.visible_devices, which
names each physical GPU (or MIG device) once however many of its replicas a container holds.

The kubelet may skip GetPreferredAllocation (reused init-container devices, NUMA-aligned sets), so
the distinctness promise is checked here, at Allocate, not only in ReplicaPolicy.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from device_plugin.allocation.protocols import ResponseBuilder
from device_plugin.core.devices import ContainerAllocation, Device
from device_plugin.core.errors import InvalidRequestError
from device_plugin.core.ids import parse_device_id
from device_plugin.timeslice.replicas import KUBELET_CHOSEN_ADVICE, SharedResource

log = logging.getLogger(__name__)


class ReplicaResponseBuilder:
    def __init__(
        self,
        inner: ResponseBuilder,
        *,
        resource_name: str,
        fail_requests_greater_than_one: bool = False,
        require_distinct_gpus: bool = False,
    ) -> None:
        self._inner = inner
        self.resource_name = resource_name
        self.fail_requests_greater_than_one = fail_requests_greater_than_one
        self.require_distinct_gpus = require_distinct_gpus

    @classmethod
    def for_resource(cls, shared: SharedResource, inner: ResponseBuilder) -> ReplicaResponseBuilder:
        return cls(
            inner,
            resource_name=shared.name,
            fail_requests_greater_than_one=shared.fail_requests_greater_than_one,
            require_distinct_gpus=shared.require_distinct_gpus,
        )

    def build(self, devices: Sequence[Device]) -> ContainerAllocation:
        ids = [d.id for d in devices]
        replicas = [i for i in ids if parse_device_id(i).replica is not None]
        if self.fail_requests_greater_than_one and len(replicas) > 1:
            raise InvalidRequestError(
                f"{self.resource_name}: failRequestsGreaterThanOne is set, so a container may "
                "request at most 1 "
                f"replica of a time-sliced GPU; this one requested {len(replicas)} "
                f"({', '.join(replicas)})"
            )
        by_base: dict[str, list[str]] = {}
        for device_id in ids:
            by_base.setdefault(parse_device_id(device_id).base, []).append(device_id)
        shared = {base: members for base, members in by_base.items() if len(members) > 1}
        if shared and self.require_distinct_gpus:
            detail = "; ".join(
                f"{', '.join(m)} are all on {base}" for base, m in sorted(shared.items())
            )
            raise InvalidRequestError(
                f"{self.resource_name}: requireDistinctGPUs is set, so each replica of a request "
                "must be on its own "
                f"GPU, but {detail}. {KUBELET_CHOSEN_ADVICE}"
            )
        if shared:
            # Allowed, but the container sees fewer GPUs than it asked for: say so in the log.
            log.info(
                "%s: %d replicas on %d GPU(s); the container sees each GPU once",
                self.resource_name,
                len(ids),
                len(by_base),
            )
        return self._inner.build(devices)
