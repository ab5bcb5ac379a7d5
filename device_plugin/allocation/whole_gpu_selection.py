"""TopologyPolicy: the AllocationPolicy for whole-GPU resources, backed by the topology-aware
Allocator.

It maps device IDs to NVML indices (Device.gpu_indices), asks the Allocator through its unchecked
entry (the request is a ValidatedRequest: checked once, at the resource boundary), maps the answer
back to IDs, writes one DEBUG log line per decision (the kubelet's admission path gets no INFO line)
and hands the AllocationDecision to an optional hook (the allocation-quality metric). Pure apart
from the log line and the hook: no NVML, no clock.

Being pure, a decision depends only on (available GPUs, must-include GPUs, size): the last
DECISION_CACHE_SIZE decisions are kept, since a kubelet asks again and again for the same free set
while a deployment's pods are admitted. Every request still gets its log line and its hook call.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from device_plugin.allocation.protocols import ValidatedRequest
from device_plugin.core.devices import Device
from device_plugin.gpu_sets import Allocator
from device_plugin.gpu_sets.decision import AllocationDecision, DecisionHook

log = logging.getLogger(__name__)

DECISION_CACHE_SIZE = 1024


def require_whole_gpus(resource_name: str, devices: Iterable[Device]) -> None:
    """Refuse (ValueError) devices that are not one whole GPU each: the topology policy maps IDs to
    GPUs.

    Composition calls it before it gives a resource this policy, so no request needs the check.
    """
    id_by_index: dict[int, str] = {}
    for device in devices:
        if len(device.gpu_indices) != 1:
            raise ValueError(
                f"{resource_name}: device {device.id!r} is not one whole GPU (GPUs "
                f"{list(device.gpu_indices)}); "
                "the topology policy serves whole-GPU resources only"
            )
        index = device.gpu_indices[0]
        if index in id_by_index:
            raise ValueError(
                f"{resource_name}: devices {id_by_index[index]!r} and {device.id!r} are the same "
                f"GPU {index}; "
                "the topology policy serves whole-GPU resources only"
            )
        id_by_index[index] = device.id


class TopologyPolicy:
    """Chooses whole GPUs by the objective of device_plugin.gpu_sets.objective."""

    def __init__(
        self,
        allocator: Allocator,
        *,
        on_decision: DecisionHook | None = None,
        resource_name: str = "GPUs",
    ) -> None:
        self._allocator = allocator
        self._on_decision = on_decision
        self._resource = resource_name
        self._decisions: OrderedDict[tuple[int, int, int], AllocationDecision] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def allocator(self) -> Allocator:
        return self._allocator

    def choose(self, request: ValidatedRequest) -> tuple[str, ...]:
        # Whole GPUs only (require_whole_gpus, at composition): one device per GPU index, so the
        # canonical order of a ValidatedRequest's IDs is ascending GPU index and the allocator needs
        # no sort or check.
        devices, available, must_include, size = (
            request.devices,
            request.available,
            request.must_include,
            request.size,
        )
        id_by_index = {devices[device_id].gpu_indices[0]: device_id for device_id in available}
        must_indices = [devices[device_id].gpu_indices[0] for device_id in must_include]
        decision = self._decide(list(id_by_index), must_indices, size)
        chosen = tuple(id_by_index[index] for index in decision.chosen)
        if not log.isEnabledFor(logging.DEBUG):
            self._notify(decision)
            return chosen
        log.debug(
            "%s: %d of %d available (must include %s) -> %s (GPUs %s); ring %.1f GB/s, "
            "best on an empty node %.1f GB/s%s",
            self._resource,
            size,
            len(available),
            ",".join(must_include) or "none",
            ",".join(chosen),
            ",".join(map(str, decision.chosen)),
            decision.ring_bandwidth_gbps,
            decision.best_possible_gbps,
            "" if decision.optimal else " (below it: the free GPUs are fragmented)",
        )
        self._notify(decision)
        return chosen

    def _decide(
        self, available: list[int], must_include: list[int], size: int
    ) -> AllocationDecision:
        key = (_mask(available), _mask(must_include), size)
        with self._lock:
            cached = self._decisions.get(key)
            if cached is not None:
                self._decisions.move_to_end(key)
                return cached
        decision = self._allocator.describe(
            self._allocator.allocate(available, must_include, size), len(available)
        )
        with self._lock:
            self._decisions[key] = decision
            if len(self._decisions) > DECISION_CACHE_SIZE:
                self._decisions.popitem(last=False)
        return decision

    def _notify(self, decision: AllocationDecision) -> None:
        if self._on_decision is None:
            return
        try:
            self._on_decision(decision)
        except Exception:  # a metrics hook must never fail pod admission
            log.exception("allocation decision hook failed; the allocation itself stands")


def _mask(indices: Sequence[int]) -> int:
    mask = 0
    for index in indices:
        mask |= 1 << index
    return mask
