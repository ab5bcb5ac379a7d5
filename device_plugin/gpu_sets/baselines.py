"""Baseline policies the simulator compares ours with. Written by us from their descriptions, not
copied.

- first_fit: no preference; the kubelet takes the first `size` devices of its (random) order.
- PairwisePartitionPolicy: NVIDIA's best-effort policy as its documentation describes it:
  pair score = 100 per *direct* NVLink (links through NVSwitch are invisible to it) plus PCIe points
  (BRD 60, PIX 50, PXB 40, PHB 30, NODE 20, SYS 10); a 1-GPU request takes the first device in input
  order; otherwise pad the input with empty slots up to a multiple of `size`, find the partition of
  everything into sets of `size` (the padding all in one set) with the highest summed set score
  among partitions having a padding-free set that contains must_include (first found in input order
  wins ties), and return that partition's best such set. NVIDIA enumerates every partition; we
  compute the same maximum with a memoised recursion over the remaining devices (the value is
  order-independent) and then walk it in input order to find the first optimal partition, which is
  what enumeration finds.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from device_plugin.nvml.types import PcieLevel
from device_plugin.topology.model import Topology

_PCIE_POINTS = {
    PcieLevel.INTERNAL: 60,
    PcieLevel.SINGLE_SWITCH: 50,
    PcieLevel.MULTIPLE_SWITCHES: 40,
    PcieLevel.HOST_BRIDGE: 30,
    PcieLevel.NODE: 20,
    PcieLevel.SYSTEM: 10,
}
_IMPOSSIBLE = -(1 << 60)


def first_fit(
    kubelet_order: Sequence[int], must_include: Sequence[int], size: int
) -> tuple[int, ...]:
    chosen = list(must_include)
    for gpu in kubelet_order:
        if len(chosen) == size:
            break
        if gpu not in chosen:
            chosen.append(gpu)
    return tuple(sorted(chosen))


class PairwisePartitionPolicy:
    """NVIDIA go-gpuallocator best-effort, reimplemented; one instance per topology (it memoises
    values)."""

    def __init__(self, topology: Topology) -> None:
        n = topology.gpu_count
        self._score = [[0] * n for _ in range(n)]
        for a in range(n):
            for b in range(n):
                if a != b:
                    link = topology.pair(a, b)
                    direct = 0 if link.via_nvswitch else link.nvlinks
                    self._score[a][b] = 100 * direct + _PCIE_POINTS[link.pcie_level]
        self._memo: dict[tuple[int, int, int, int, bool], int] = {}

    def _set_score(self, members: Sequence[int]) -> int:
        return sum(self._score[a][b] for i, a in enumerate(members) for b in members[i + 1 :])

    def _value(self, mask: int, pads: int, size: int, required: int, need: bool) -> int:
        """Best summed score of partitions of `mask` plus `pads` empty slots (order-independent)."""
        if not mask:
            return 0 if not pads and not need else _IMPOSSIBLE
        key = (mask, pads, size, required, need)
        if key in self._memo:
            return self._memo[key]
        members = [g for g in range(mask.bit_length()) if mask >> g & 1]
        first, rest = members[0], members[1:]
        best = _IMPOSSIBLE
        for others in combinations(rest, size - 1):
            group = (first, *others)
            group_mask = sum(1 << g for g in group)
            still_need = need and (required & group_mask) != required
            tail = self._value(mask ^ group_mask, pads, size, required, still_need)
            if tail > _IMPOSSIBLE:
                best = max(best, self._set_score(group) + tail)
        if pads and size - pads >= 1:
            for others in combinations(rest, size - pads - 1):
                group = (first, *others)
                group_mask = sum(1 << g for g in group)
                tail = self._value(mask ^ group_mask, 0, size, required, need)
                if tail > _IMPOSSIBLE:
                    best = max(best, self._set_score(group) + tail)
        self._memo[key] = best
        return best

    def choose(
        self, kubelet_order: Sequence[int], must_include: Sequence[int], size: int
    ) -> tuple[int, ...]:
        if size == 1:
            return (must_include[0],) if must_include else (kubelet_order[0],)
        required = sum(1 << g for g in must_include)
        pads = (-len(kubelet_order)) % size
        remaining = list(kubelet_order)
        need, mask = True, sum(1 << g for g in kubelet_order)
        sets: list[tuple[int, ...]] = []
        # Walk the optimum in input order: at each step the first group (in enumeration order) that
        # still admits an optimal completion, as exhaustive enumeration with strict ">" would keep.
        while remaining:
            target = self._value(mask, pads, size, required, need)
            first, rest = remaining[0], remaining[1:]
            options = [(g, False) for g in combinations(rest, size - 1)]
            if pads:
                options += [(g, True) for g in combinations(rest, size - pads - 1)]
            for others, padded in options:
                group = (first, *others)
                group_mask = sum(1 << g for g in group)
                still_need = need and (padded or (required & group_mask) != required)
                tail = self._value(
                    mask ^ group_mask, 0 if padded else pads, size, required, still_need
                )
                if tail > _IMPOSSIBLE and self._set_score(group) + tail == target:
                    if not padded:
                        sets.append(group)
                    pads = 0 if padded else pads
                    need, mask = still_need, mask ^ group_mask
                    remaining = [g for g in remaining if not group_mask >> g & 1]
                    break
        eligible = [s for s in sets if (required & sum(1 << g for g in s)) == required]
        best = max(eligible, key=self._set_score)  # max keeps the first of equals
        return tuple(sorted(best))
