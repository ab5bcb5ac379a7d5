"""The judge of share packing: how few GPUs an optimal packer needs for a set of memory shares.

Boundary: pure; share sizes and one GPU's memory in MiB in, a count out. Exact (a depth-first search over
the shares, largest first, never trying two GPUs of the same used memory for one share), for the
tens of shares one node holds; benchmarks/bench_share_packing.py compares the GPUs a real scheduler kept
whole with it.
"""

from __future__ import annotations

from collections.abc import Sequence


def min_gpus(shares_mib: Sequence[int], gpu_mib: int) -> int:
    """The fewest GPUs of `gpu_mib` that hold every share (each share on one GPU). ValueError if a share is
    larger than a GPU."""
    sizes = sorted(shares_mib, reverse=True)
    if any(s > gpu_mib for s in sizes):
        raise ValueError(f"a share of {max(sizes)} MiB is larger than a GPU of {gpu_mib} MiB")
    if not sizes:
        return 0
    best = _first_fit_decreasing(sizes, gpu_mib)
    lower = -(-sum(sizes) // gpu_mib)

    def place(at: int, used: list[int]) -> None:
        nonlocal best
        if len(used) >= best:
            return
        if at == len(sizes):
            best = len(used)
            return
        seen: set[int] = set()
        for i, u in enumerate(used):
            if u + sizes[at] <= gpu_mib and u not in seen:
                seen.add(u)
                used[i] += sizes[at]
                place(at + 1, used)
                used[i] -= sizes[at]
                if best == lower:
                    return
        used.append(sizes[at])
        place(at + 1, used)
        used.pop()

    if best > lower:
        place(0, [])
    return best


def _first_fit_decreasing(sizes: Sequence[int], gpu_mib: int) -> int:
    used: list[int] = []
    for size in sizes:
        for i, u in enumerate(used):
            if u + size <= gpu_mib:
                used[i] += size
                break
        else:
            used.append(size)
    return len(used)
