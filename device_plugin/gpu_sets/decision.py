"""Value types an allocation produces: the decision (for logs and the quality metric) and its
explanation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from device_plugin.gpu_sets.objective import FragmentationScore, SetScore


@dataclass(frozen=True)
class AllocationDecision:
    """What one request got, and how it compares with the best an empty node offers at that size.

    ring_bandwidth_gbps: criterion 1 of the chosen set (0 for one GPU: no collective).
    best_possible_gbps: the best ring of any `size` GPUs of this node when all are free.
    optimal: the chosen ring equals best_possible_gbps, i.e. fragmentation cost this pod nothing.
    exact: the exact search answered (<= 16 GPUs); False for the bounded search.
    nic_distance: the farthest of the chosen GPUs' distances to their nearest RDMA NIC
    ("PIX".."SYS"); None on a node without NICs.
    """

    chosen: tuple[int, ...]
    size: int
    available_count: int
    ring_bandwidth_gbps: float
    best_possible_gbps: float
    optimal: bool
    exact: bool
    nic_distance: str | None = None


DecisionHook = Callable[[AllocationDecision], None]


@dataclass(frozen=True)
class Candidate:
    gpus: tuple[int, ...]
    score: SetScore
    # of what the choice leaves free; None in the bounded search
    fragmentation: FragmentationScore | None


@dataclass(frozen=True)
class Explanation:
    decision: AllocationDecision
    chosen: Candidate
    runner_up: Candidate | None  # None when only one candidate exists
    reason: str  # why the runner-up lost, in words


def why_lost(winner: Candidate, loser: Candidate) -> str:
    """The first criterion on which `loser` is worse than `winner`, in words."""
    a, b = winner.score, loser.score
    if b.ring_gbps != a.ring_gbps:
        return f"lower ring bandwidth: {b.ring_gbps:g} < {a.ring_gbps:g} GB/s (criterion 1)"
    if b.total_gbps != a.total_gbps:
        return (
            f"lower total pairwise bandwidth: {b.total_gbps:g} < {a.total_gbps:g} GB/s (criterion "
            "2)"
        )
    if b.numa_nodes != a.numa_nodes:
        return f"spans more NUMA nodes: {b.numa_nodes} > {a.numa_nodes} (criterion 3)"
    if b.nic_rank != a.nic_rank:
        return _nic_reason(a, b, len(winner.gpus))
    fa, fb = winner.fragmentation, loser.fragmentation
    if fa is not None and fb is not None and fa != fb:
        for (size, ring_a), (_, ring_b) in zip(fa.best_ring_gbps, fb.best_ring_gbps, strict=True):
            if ring_a != ring_b:
                return (
                    f"leaves the node more fragmented: the best {size}-GPU ring still free would "
                    "be "
                    f"{ring_b:g} < {ring_a:g} GB/s (criterion 5)"
                )
        return (
            f"leaves fewer free GPUs with a fast partner: partner sum {fb.partner_sum_gbps:g} < "
            f"{fa.partner_sum_gbps:g} GB/s (criterion 5)"
        )
    return "equal on every criterion; loses the tie-break to the lower GPU indices (criterion 6)"


def _nic_reason(a: SetScore, b: SetScore, size: int) -> str:
    if size == 1:
        return "takes a GPU with a GPUDirect-close NIC, which multi-GPU pods need (criterion 4)"
    if b.close_nic_gpus != a.close_nic_gpus:
        return (
            f"fewer GPUs with a GPUDirect-close NIC: {b.close_nic_gpus} < {a.close_nic_gpus} "
            "(criterion 4)"
        )
    return (
        f"fewer GPUs on distinct close NICs (less rail-aligned): {b.distinct_close_nics} < "
        f"{a.distinct_close_nics} (criterion 4)"
    )
