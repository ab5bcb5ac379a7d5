"""GetPreferredAllocation for time-sliced replicas: which physical devices a k-replica request lands
on.

Boundary: an AllocationPolicy (device_plugin.allocation.protocols) over value types; pure and
deterministic. Its input is a ValidatedRequest: IDs, subsets and size were checked once, by the
resource.

A *unit* is the device behind replicas (a GPU, or a MIG device), named by the base of the replica
ID. Its *load* is its replicas that are not in `available`: the kubelet has given them to other
containers.
Picks are made in tiers; a tier is the set of units that tie on the placement key:
- distributed: key (picked in this request, load, picks and load of the unit's GPU). A request lands
  on as many distinct units as it can, least-loaded first, before any unit gets a second replica.
- packed: key (-(load + picked), -(GPU load + picks)). Fills the most-loaded unit first and stays
  on it, so whole GPUs stay free for later requests.
- require_distinct: a unit serves at most one replica of the request; if too few units have a free
  replica, the request is refused with InvalidRequestError (Allocate would refuse it anyway).
When a tier offers more GPUs than the request still needs, the GPUs are chosen by the injected
topology objective (allocation/gpu_choice.py), given the GPUs the request already holds, so replicas
spanning several GPUs land on well-connected ones. Ties end in canonical order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from device_plugin.allocation.gpu_choice import ChooseGpus, lowest_index_gpus
from device_plugin.allocation.protocols import ValidatedRequest
from device_plugin.config.sharing_model import Placement
from device_plugin.core.devices import Device
from device_plugin.core.errors import InvalidRequestError
from device_plugin.core.ids import parse_device_id
from device_plugin.timeslice.replicas import KUBELET_CHOSEN_ADVICE, SharedResource

log = logging.getLogger(__name__)

_PARSE_CACHE_LIMIT = 1 << 16
# (device ID, gpu_indices) of every device of the resource
_Layout = tuple[tuple[str, tuple[int, ...]], ...]
# unit base -> (gpu_indices, replicas in the resource)
_Totals = dict[str, tuple[tuple[int, ...], int]]


@dataclass
class _Unit:
    base: str
    gpus: tuple[int, ...]
    free: list[str] = field(default_factory=list)  # available, not yet picked; lowest replica first
    total: int = 0
    available: int = 0
    picked: int = 0

    @property
    def load(self) -> int:
        return self.total - self.available


class ReplicaPolicy:
    def __init__(
        self,
        placement: Placement = Placement.DISTRIBUTED,
        *,
        require_distinct: bool = False,
        choose_gpus: ChooseGpus | None = None,
        resource_name: str = "",
    ) -> None:
        self.placement = placement
        self.require_distinct = require_distinct
        self._choose_gpus = choose_gpus or lowest_index_gpus
        self._resource = resource_name or "shared resource"
        # Parsing IDs dominates the cost of a request; a resource's IDs are few and stable, so
        # remember them.
        self._parsed: dict[str, tuple[int, str]] = {}
        self._layout_cache: tuple[_Layout, _Totals] = ((), {})

    @classmethod
    def for_resource(
        cls, shared: SharedResource, choose_gpus: ChooseGpus | None = None
    ) -> ReplicaPolicy:
        return cls(
            shared.placement,
            require_distinct=shared.require_distinct_gpus,
            choose_gpus=choose_gpus,
            resource_name=shared.name,
        )

    def choose(self, request: ValidatedRequest) -> tuple[str, ...]:
        devices, available, must_include, size = (
            request.devices,
            request.available,
            request.must_include,
            request.size,
        )
        units = self._units(devices, available, must_include)
        picked = list(dict.fromkeys(must_include))
        if self.require_distinct:
            doubled = sorted(u.base for u in units.values() if u.picked > 1)
            if doubled:
                raise InvalidRequestError(
                    f"{self._resource}: requireDistinctGPUs is set, but must_include holds several "
                    "replicas of "
                    f"{', '.join(doubled)}. {KUBELET_CHOSEN_ADVICE}"
                )
        gpu_load: dict[tuple[int, ...], int] = {}
        gpu_picked: dict[tuple[int, ...], int] = {}
        for unit in units.values():
            gpu_load[unit.gpus] = gpu_load.get(unit.gpus, 0) + unit.load
            gpu_picked[unit.gpus] = gpu_picked.get(unit.gpus, 0) + unit.picked
        while len(picked) < size:
            candidates = [
                u for u in units.values() if u.free and not (self.require_distinct and u.picked)
            ]
            if not candidates:
                raise InvalidRequestError(self._shortfall(size, units))
            key = self._key_function(gpu_load, gpu_picked)
            best = min(key(u) for u in candidates)
            tier = sorted((u for u in candidates if key(u) == best), key=lambda u: (u.gpus, u.base))
            for unit in self._take(tier, units, size - len(picked)):
                picked.append(unit.free.pop(0))
                unit.picked += 1
                gpu_picked[unit.gpus] += 1
        result = tuple(sorted(picked, key=lambda i: (devices[i].gpu_indices, self._replica_key(i))))
        # the kubelet's admission path: DEBUG, built only when shown
        if not log.isEnabledFor(logging.DEBUG):
            return result
        log.debug(
            "%s: %d of %d replicas (%s) -> %s on GPUs %s",
            self._resource,
            size,
            len(available),
            self.placement.value,
            ",".join(result),
            ",".join(sorted({str(devices[i].gpu_indices[0]) for i in result}, key=int)),
        )
        return result

    def _key_function(
        self, gpu_load: Mapping[tuple[int, ...], int], gpu_picked: Mapping[tuple[int, ...], int]
    ) -> Callable[[_Unit], tuple[int, ...]]:
        if self.placement is Placement.DISTRIBUTED:
            return lambda u: (u.picked, u.load, gpu_picked[u.gpus], gpu_load[u.gpus])
        return lambda u: (-(u.load + u.picked), -(gpu_load[u.gpus] + gpu_picked[u.gpus]))

    def _take(self, tier: list[_Unit], units: Mapping[str, _Unit], need: int) -> list[_Unit]:
        """The units of `tier` to take one replica from now (one unit per GPU, at most `need`)."""
        representatives: dict[tuple[int, ...], _Unit] = {}
        for unit in tier:
            representatives.setdefault(unit.gpus, unit)
        reps = list(representatives.values())
        # Taking a unit changes only its own key and its GPU's, so several distinct GPUs can be
        # taken at once; packed without distinctness keeps filling the unit it took, so one at a
        # time there.
        batch = (
            1
            if self.placement is Placement.PACKED and not self.require_distinct
            else min(need, len(reps))
        )
        held = tuple(sorted({g for u in units.values() if u.picked for g in u.gpus}))
        if len(reps) <= batch or any(len(u.gpus) != 1 or u.gpus[0] in held for u in reps):
            return reps[:batch]
        by_gpu = {u.gpus[0]: u for u in reps}
        new = set(
            self._topology(tuple(sorted(set(held) | set(by_gpu))), held, len(held) + batch)
        ) - set(held)
        return [by_gpu[g] for g in sorted(new)]

    def _topology(
        self, candidates: tuple[int, ...], must: tuple[int, ...], count: int
    ) -> tuple[int, ...]:
        try:
            chosen = tuple(self._choose_gpus(candidates, must, count))
        except Exception:  # a faulty objective must not fail the pod; the default still answers
            log.exception("%s: choose_gpus failed; falling back to lowest indices", self._resource)
            return lowest_index_gpus(candidates, must, count)
        if (
            len(set(chosen)) != count
            or not set(must) <= set(chosen)
            or not set(chosen) <= set(candidates)
        ):
            log.warning(
                "%s: choose_gpus%s returned %s; falling back to lowest indices",
                self._resource,
                (candidates, must, count),
                chosen,
            )
            return lowest_index_gpus(candidates, must, count)
        return chosen

    def _replica_key(self, device_id: str) -> tuple[int, str]:
        """(replica number, base); a whole device sorts as replica -1."""
        key = self._parsed.get(device_id)
        if key is None:
            if len(self._parsed) > _PARSE_CACHE_LIMIT:
                self._parsed.clear()
            parsed = parse_device_id(device_id)
            key = self._parsed[device_id] = (
                -1 if parsed.replica is None else parsed.replica,
                parsed.base,
            )
        return key

    def _table(self, devices: Mapping[str, Device]) -> _Totals:
        """base -> (gpu_indices, replicas in the resource); recomputed only when the devices' layout
        changes."""
        layout = tuple((device_id, device.gpu_indices) for device_id, device in devices.items())
        # one attribute, so concurrent callers never see a torn pair
        cached_layout, totals = self._layout_cache
        if cached_layout != layout:
            totals = {}
            for device_id, gpus in layout:
                base = self._replica_key(device_id)[1]
                totals[base] = (gpus, totals.get(base, ((), 0))[1] + 1)
            self._layout_cache = (layout, totals)
        return totals

    def _units(
        self, devices: Mapping[str, Device], available: Sequence[str], must_include: Sequence[str]
    ) -> dict[str, _Unit]:
        units = {
            base: _Unit(base, gpus, total=total)
            for base, (gpus, total) in sorted(
                self._table(devices).items(), key=lambda kv: (kv[1][0], kv[0])
            )
        }
        must = set(must_include)
        key = self._replica_key
        for (_, base), device_id in sorted((key(i), i) for i in set(available)):
            unit = units[base]
            unit.available += 1
            if device_id in must:
                unit.picked += 1
            else:
                unit.free.append(device_id)
        return units

    def _shortfall(self, size: int, units: Mapping[str, _Unit]) -> str:
        usable = sum(1 for u in units.values() if u.free or u.picked)
        if not self.require_distinct:
            total = sum(u.available for u in units.values())
            return f"{self._resource}: {size} replicas requested, only {total} available"
        return (
            f"{self._resource}: requireDistinctGPUs is set and {size} replicas were requested, but "
            f"only {usable} "
            "distinct GPUs have a replica among the available devices"
        )
