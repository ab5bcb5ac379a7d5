"""GetPreferredAllocation for MIG resources: which MIG devices, on which parent GPUs.

Boundary: an AllocationPolicy (device_plugin.allocation.protocols) over value types; pure and
deterministic. Its input is a ValidatedRequest: IDs, subsets and size were checked once, by the
resource.

NVIDIA balances MIG picks per MIG UUID, so "distributed" does not balance parent GPUs and ties are
arbitrary. Here the unit of balance is the parent GPU. A GPU's *load* is its devices of this
resource that are not in `available` (the kubelet gave them to other containers); picks are made in
tiers of GPUs that
tie on the placement key:
- spread (NVIDIA's "distributed", the default): key (picked by this request, load). A request lands
  on as many parent GPUs as it can, least-loaded first, so one GPU fault or noisy neighbour hurts it
  least.
- pack (NVIDIA's "packed"): key (-(load + picked), free devices left). Fills the busiest GPU first
  and stays on it (best fit), so whole GPUs stay empty for re-partitioning or for bigger requests.
When a tier has more GPUs than the request still takes from it, the GPUs are chosen by the injected
`choose_gpus` (allocation/gpu_choice.py). A failing or invalid answer falls back to the lowest
indices with a warning. Inside a GPU, devices go in canonical order. The placement is the config's
(one enum for MIG and time-slicing, flags.plugin.sharedDevicesAllocationPolicy): DISTRIBUTED
spreads, PACKED packs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from device_plugin.allocation.gpu_choice import ChooseGpus, lowest_index_gpus
from device_plugin.allocation.protocols import ValidatedRequest, device_sort_key
from device_plugin.config.sharing_model import Placement

log = logging.getLogger(__name__)


class MigAllocationPolicy:
    def __init__(
        self,
        placement: Placement = Placement.DISTRIBUTED,
        *,
        choose_gpus: ChooseGpus | None = None,
        resource_name: str = "MIG resource",
    ) -> None:
        self.placement = placement
        self._choose_gpus = choose_gpus or lowest_index_gpus
        self._resource = resource_name

    def choose(self, request: ValidatedRequest) -> tuple[str, ...]:
        devices, available, must_include, size = (
            request.devices,
            request.available,
            request.must_include,
            request.size,
        )
        order = available  # canonical order, no duplicates (ValidatedRequest)
        must = set(must_include)
        free: dict[int, list[str]] = {}
        for device_id in order:
            gpu = devices[device_id].gpu_indices[0]
            free.setdefault(gpu, [])
            if device_id not in must:
                free[gpu].append(device_id)
        in_available = set(order)
        load = {gpu: 0 for gpu in free}
        for device_id, device in devices.items():
            if device_id not in in_available:
                gpu = device.gpu_indices[0]
                load[gpu] = load.get(gpu, 0) + 1
        picked = {gpu: 0 for gpu in load}
        for device_id in must:
            picked[devices[device_id].gpu_indices[0]] += 1
        chosen = list(must_include)  # canonical order
        while len(chosen) < size:
            candidates = [gpu for gpu, ids in free.items() if ids]
            if not candidates:  # the caller checked size <= len(available); a bug if reached
                raise RuntimeError(f"{self._resource}: ran out of devices choosing {size}")
            key = self._key(load, picked, free)
            best = min(key(gpu) for gpu in candidates)
            tier = sorted(gpu for gpu in candidates if key(gpu) == best)
            batch = 1 if self.placement is Placement.PACKED else min(size - len(chosen), len(tier))
            for gpu in self._pick_gpus(tier, picked, batch):
                chosen.append(free[gpu].pop(0))
                picked[gpu] += 1
        result = tuple(sorted(chosen, key=lambda i: device_sort_key(devices[i])))
        # the kubelet's admission path: DEBUG, built only when shown
        if not log.isEnabledFor(logging.DEBUG):
            return result
        log.debug(
            "%s: %d of %d MIG devices (%s over parent GPUs) -> %s on GPUs %s",
            self._resource,
            size,
            len(available),
            self.placement.value,
            ",".join(result),
            ",".join(str(devices[i].gpu_indices[0]) for i in result),
        )
        return result

    def _key(
        self, load: Mapping[int, int], picked: Mapping[int, int], free: Mapping[int, list[str]]
    ) -> Callable[[int], tuple[int, ...]]:
        if self.placement is Placement.DISTRIBUTED:
            return lambda gpu: (picked[gpu], load[gpu])
        return lambda gpu: (-(load[gpu] + picked[gpu]), len(free[gpu]))

    def _pick_gpus(self, tier: list[int], picked: Mapping[int, int], batch: int) -> list[int]:
        """`batch` GPUs of `tier`: GPUs the request already holds first, then new ones by the
        topology."""
        held = tuple(sorted(gpu for gpu, n in picked.items() if n))
        taken = [gpu for gpu in tier if gpu in held][:batch]
        fresh = [gpu for gpu in tier if gpu not in held]
        need = batch - len(taken)
        if need <= 0 or not fresh:
            return taken
        if len(fresh) <= need:
            return taken + fresh
        return taken + self._topology(held, fresh, need)

    def _topology(self, held: tuple[int, ...], fresh: list[int], need: int) -> list[int]:
        candidates = tuple(sorted(set(held) | set(fresh)))
        count = len(held) + need
        try:
            answer = tuple(self._choose_gpus(candidates, held, count))
        except Exception:  # a faulty objective must not fail the pod; the default still answers
            log.exception("%s: choose_gpus failed; falling back to lowest indices", self._resource)
            answer = lowest_index_gpus(candidates, held, count)
        new = sorted(set(answer) - set(held))
        if len(set(answer)) != count or not set(held) <= set(answer) or not set(new) <= set(fresh):
            log.warning(
                "%s: choose_gpus%s returned %s; falling back to lowest indices",
                self._resource,
                (candidates, held, count),
                answer,
            )
            new = sorted(fresh)[:need]
        return new
