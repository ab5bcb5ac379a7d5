"""Whether a set of GPUs is as good as the allocator's own choice among the GPUs free at that moment.

Shared by the benchmarks (the first-fit model, the real-scheduler replay) and the real-node tests, so that
"optimal among the free GPUs" means one thing everywhere. A set of two or more GPUs is optimal when its
score (criteria 1-4: ring bandwidth, total bandwidth, NUMA span, NIC) equals that of the allocator's best set
of its size among the free GPUs; a single GPU, where criteria 1-3 tie, when it is as good as the allocator's
own choice by criteria 4 and 5 (NIC, and what it leaves free).
"""

from __future__ import annotations

from collections.abc import Iterable

from device_plugin.gpu_sets import Allocator


def optimal(allocator: Allocator, free: Iterable[int], chosen: Iterable[int]) -> bool:
    free_list, got = sorted(free), tuple(sorted(chosen))
    if len(got) > 1:
        return allocator.score(got) == allocator.score(allocator.allocate(free_list, [], len(got)))
    best = allocator.explain(free_list, [], 1).chosen
    mine = allocator.explain(free_list, list(got), 1).chosen  # the only candidate: the scores of `chosen`
    return (mine.score, mine.fragmentation) == (best.score, best.fragmentation)
