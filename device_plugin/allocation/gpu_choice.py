"""How a sharing policy asks which GPUs a request spans, and the answer when nobody better is asked.

Boundary: a type and one pure function, shared by the MIG policy (device_plugin/mig/policy.py) and
the time-slicing policy (device_plugin/timeslice/policy.py): both pick devices in tiers and, when a
tier offers more GPUs than the request still needs, ask `choose_gpus(candidates, must, count)` (the
topology objective: dp/composition.py injects the allocator's). `must` are the GPUs the request
already holds, `candidates` include them, and the answer has `count` GPUs including `must`.
"""

from __future__ import annotations

from collections.abc import Callable

ChooseGpus = Callable[[tuple[int, ...], tuple[int, ...], int], tuple[int, ...]]


def lowest_index_gpus(
    candidates: tuple[int, ...], must: tuple[int, ...], count: int
) -> tuple[int, ...]:
    """The topology-blind default: the `must` GPUs, then the lowest candidate indices, `count` in
    all."""
    chosen = sorted(set(must))
    for gpu in sorted(set(candidates) - set(must)):
        if len(chosen) >= count:
            break
        chosen.append(gpu)
    return tuple(sorted(chosen))
