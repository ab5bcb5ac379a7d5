"""Bandwidth facts: what one GPU pair can move per second, in one direction, by how it is connected.

This is the one table the topology model turns link facts into numbers with. Pure data and two
lookups; no NVML, no I/O. Figures are one-direction GB/s (1 GB = 10^9 bytes).

NVLink, per link, by GPU generation (from the model name NVML reports):

| generation                         | per link | links per GPU | per GPU  |
|------------------------------------|----------|---------------|----------|
| P100 (NVLink 1)                    | 20 GB/s  | 4             | 80 GB/s  |
| V100 (NVLink 2)                    | 25 GB/s  | 6             | 150 GB/s |
| A100 / A800 (NVLink 3)             | 25 GB/s  | 12            | 300 GB/s |
| H100 / H800 / H200 / GH200 (NVL 4) | 25 GB/s  | 18            | 450 GB/s |
| B100 / B200 / GB200 (NVLink 5)     | 50 GB/s  | 18            | 900 GB/s |
| GA102 bridges (RTX A6000/A5000/A40/3090) | ~14 GB/s | 4       | 56 GB/s  |

GA102 cards link through an NVLink bridge of 4 links rated 112.5 GB/s in both directions together,
i.e. 56.25 GB/s one way, 14.06 GB/s per link. A model this table does not know falls back to 25 GB/s
per link (the figure of every data-centre generation from V100 to H200); the topology builder logs
that it did.

PCIe peer-to-peer, by the closest common ancestor (nvidia-smi topo -m names). These are
representative *achievable* peer-to-peer figures for PCIe Gen4 x16 (about 24-26 GB/s measured
through one switch; every extra hop and especially the CPU interconnect costs more). What the
allocator relies on is their order, closest fastest: BRD >= PIX > PXB > PHB > NODE > SYS.

| level | path                                               | GB/s |
|-------|----------------------------------------------------|------|
| BRD   | same board (dual-GPU card)                         | 24   |
| PIX   | one PCIe switch                                    | 24   |
| PXB   | several PCIe switches, no host bridge              | 20   |
| PHB   | through a PCIe host bridge (root complex)          | 16   |
| NODE  | between host bridges of one CPU / NUMA node        | 12   |
| SYS   | across the CPU interconnect (UPI / xGMI)           | 8    |

A pair's bandwidth is its NVLink bandwidth when it has any NVLink (direct or through NVSwitch),
otherwise its PCIe figure: NCCL routes over NVLink when it exists and does not add PCIe to it.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from device_plugin.nvml.types import PcieLevel

FALLBACK_NVLINK_PER_LINK_GBPS = 25.0
GA102_BRIDGE_PER_LINK_GBPS = 112.5 / 2 / 4  # 14.0625: 112.5 GB/s both ways over 4 links

# (pattern on the upper-cased model name, per-link GB/s), first match wins; specific before generic.
_NVLINK_PER_LINK: tuple[tuple[re.Pattern[str], float], ...] = (
    (re.compile(r"\bG?B(100|200|300)\b"), 50.0),
    (re.compile(r"\bG?H(100|200|800)\b"), 25.0),
    (re.compile(r"\bA(100|800)\b"), 25.0),
    (re.compile(r"\bV100"), 25.0),
    (re.compile(r"\bP100"), 20.0),
    (re.compile(r"\b(RTX )?A(6000|5500|5000|40)\b|\b3090"), GA102_BRIDGE_PER_LINK_GBPS),
)

PCIE_P2P_GBPS = MappingProxyType(
    {
        PcieLevel.INTERNAL: 24.0,
        PcieLevel.SINGLE_SWITCH: 24.0,
        PcieLevel.MULTIPLE_SWITCHES: 20.0,
        PcieLevel.HOST_BRIDGE: 16.0,
        PcieLevel.NODE: 12.0,
        PcieLevel.SYSTEM: 8.0,
    }
)


def nvlink_per_link_gbps(model_name: str) -> float | None:
    """Per-link one-direction NVLink GB/s for a GPU model, or None when the table does not know
    it."""
    upper = model_name.upper()
    for pattern, gbps in _NVLINK_PER_LINK:
        if pattern.search(upper):
            return gbps
    return None


def pcie_p2p_gbps(level: PcieLevel) -> float:
    """Achievable one-direction peer-to-peer GB/s through the given closest common PCIe ancestor."""
    return PCIE_P2P_GBPS[level]
