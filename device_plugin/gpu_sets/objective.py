"""The allocation objective for whole GPUs, written down once, and its packed integer form.

Request: choose `size` = k GPUs from the available set A, containing the must-include set M
(M ⊆ A, |M| ≤ k ≤ |A|). Candidates: every S with M ⊆ S ⊆ A and |S| = k. w(a, b) is the pair's
one-direction bandwidth in integer MB/s (device_plugin.topology.facts, so sums and comparisons are
exact). The chosen S maximises, lexicographically:

1. ring(S), the bandwidth a ring collective (NCCL all-reduce) gets through S: the maximum, over all
   Hamiltonian cycles of S, of the cycle's slowest hop. For |S| = 2 it is w(a, b); for |S| = 1 it is
   defined as 0 (no collective; all single GPUs tie here).
2. total(S) = sum of w(a, b) over all pairs of S: more fast pairs, more parallel channels.
3. fewer NUMA nodes spanned by S (GPUs whose node is unknown count as one node, "unknown").
4. GPUDirect-close NICs (device_plugin.gpu_sets.nic): for |S| >= 2, more GPUs of S with a NIC at
   PIX or PXB, then more of them on distinct NICs (rail-aligned); for |S| = 1, a GPU without a close
   NIC wins, keeping NIC-close GPUs for the multi-GPU pods that go multi-node. Equal for all sets on
   a node without RDMA NICs. It comes after ring and total bandwidth, so it never costs bandwidth.
5. fragmentation of what is left, R = A minus S: the larger frag(R) wins, where
   frag(R) = (Q8(R), Q4(R), Q2(R), P(R)) compared in that order,
   Qj(R) = max ring(T) over T ⊆ R with |T| = j (0 when |R| < j): the best ring a later j-GPU request
   could still get (big groups first, they are the hardest to re-form), and
   P(R) = sum over v in R of max over u in R, u ≠ v of w(u, v) (0 when |R| ≤ 1): how many free GPUs
   keep a fast partner. So a 1-GPU request takes the GPU whose loss hurts the rest least: it keeps
   an NVLink pair or quad whole while a GPU without a partner is free, and any request prefers GPUs
   of an already broken group when an equally good set exists there.
6. the lexicographically smallest ascending index tuple (deterministic; input order never matters).

Everything here depends only on the sets, never on the order of the input lists.
"""

from __future__ import annotations

from dataclasses import dataclass

FRAG_SIZES = (8, 4, 2)  # the Qj of criterion 5, compared in this order

# Packed key of criteria 1-4: ring << 98 | total << 34 | (255 - numa) << 26 | nic. Each field fits
# its slot: ring < 2^24 MB/s (18 links x 50 GB/s = 900,000), total < 2^64, NUMA nodes <= 255, nic <
# 2^26.
_RING_SHIFT = 98
_TOTAL_SHIFT = 34
_NUMA_SHIFT = 26
_NUMA_LIMIT = 255
_NIC_MASK = (1 << _NUMA_SHIFT) - 1
# Packed fragmentation: Q8 << 96 | Q4 << 64 | Q2 << 32 | P (each Q < 2^24, P < 2^32 up to 4096
# GPUs).
_FRAG_SHIFTS = (96, 64, 32)


def pack_key(ring_mbps: int, total_mbps: int, numa_nodes: int, nic_rank: int = 0) -> int:
    numa = _NUMA_LIMIT - min(numa_nodes, _NUMA_LIMIT)
    return (
        (ring_mbps << _RING_SHIFT) | (total_mbps << _TOTAL_SHIFT) | (numa << _NUMA_SHIFT) | nic_rank
    )


def key_ring(key: int) -> int:
    """Criterion 1 (MB/s) of a packed key."""
    return key >> _RING_SHIFT


def pack_frag(best_rings_mbps: tuple[int, ...], partner_sum_mbps: int) -> int:
    value = partner_sum_mbps
    for ring, shift in zip(best_rings_mbps, _FRAG_SHIFTS, strict=True):
        value |= ring << shift
    return value


@dataclass(frozen=True)
class SetScore:
    """Criteria 1-4 of one GPU set, bandwidths in GB/s.

    nic_rank is criterion 4 packed (device_plugin.gpu_sets.nic, larger better); close_nic_gpus and
    distinct_close_nics spell it out (the allocator fills them in; unpack cannot tell them apart).
    """

    ring_gbps: float
    total_gbps: float
    numa_nodes: int
    nic_rank: int = 0
    close_nic_gpus: int = 0
    distinct_close_nics: int = 0

    @classmethod
    def unpack(cls, key: int) -> SetScore:
        ring = key >> _RING_SHIFT
        total = (key >> _TOTAL_SHIFT) & ((1 << (_RING_SHIFT - _TOTAL_SHIFT)) - 1)
        numa = _NUMA_LIMIT - ((key >> _NUMA_SHIFT) & _NUMA_LIMIT)
        return cls(
            ring_gbps=ring / 1000,
            total_gbps=total / 1000,
            numa_nodes=numa,
            nic_rank=key & _NIC_MASK,
        )


@dataclass(frozen=True)
class FragmentationScore:
    """Criterion 5 for what a choice leaves free: best ring per FRAG_SIZES size, and P, in GB/s."""

    best_ring_gbps: tuple[tuple[int, float], ...]  # ((8, Q8), (4, Q4), (2, Q2))
    partner_sum_gbps: float

    @classmethod
    def unpack(cls, frag: int) -> FragmentationScore:
        rings = tuple(
            (size, ((frag >> shift) & 0xFFFFFFFF) / 1000)
            for size, shift in zip(FRAG_SIZES, _FRAG_SHIFTS, strict=True)
        )
        return cls(best_ring_gbps=rings, partner_sum_gbps=(frag & 0xFFFFFFFF) / 1000)
