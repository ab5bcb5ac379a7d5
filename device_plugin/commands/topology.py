"""`gpu-device-plugin topology`: the node's GPU topology, nvidia-smi topo -m style, with bandwidths.

With a config that time-slices GPUs (--config, as `run` takes it), the shared resources follow, with
the warning that time-slicing isolates nothing; without one, no such warning.
"""

from __future__ import annotations

import argparse
import json

from device_plugin.commands._compose import Composed, add_config_arguments, composed_node
from device_plugin.commands._machine import add_machine_argument, fail
from device_plugin.core.errors import PluginError
from device_plugin.mig.render import render_mig_tree
from device_plugin.timeslice import describe_sharing
from device_plugin.topology.build import build_topology
from device_plugin.topology.model import Topology

NAME = "topology"
HELP = "print the GPU topology matrix (NVLink / NVSwitch / PCIe level, NUMA) and per-pair bandwidth"

LEGEND = """Legend:
  X     = self
  NV#   = # direct NVLinks          NVS#  = # NVLinks through NVSwitch
  PIX   = one PCIe switch           PXB   = several PCIe switches
  PHB   = a PCIe host bridge        NODE  = host bridges of one NUMA node
  SYS   = across the CPU interconnect
NIC columns: the GPU's PCIe distance to each RDMA NIC; PIX or PXB is GPUDirect-close.
Bandwidth: one direction, GB/s, from the facts table (docs/allocation.md,
device_plugin/topology/facts.py)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_machine_argument(parser)
    add_config_arguments(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def render(topology: Topology) -> str:
    n = topology.gpu_count
    heads = [f"GPU{i}" for i in range(n)]
    width = max(6, *(len(h) + 1 for h in heads))

    def row(name: str, cells: list[str]) -> str:
        return f"{name:<7}" + "".join(f"{c:>{width}}" for c in cells)

    nic_heads = [f"NIC{k}" for k in range(topology.nic_count)]
    lines = [row("", [*heads, *nic_heads, "NUMA"])]
    for a in range(n):
        cells = ["X" if a == b else topology.pair(a, b).label for b in range(n)]
        cells += [topology.nic_level(a, k).short_name for k in range(topology.nic_count)]
        numa = topology.numa_nodes[a]
        lines.append(row(f"GPU{a}", [*cells, "N/A" if numa is None else str(numa)]))
    lines += render_nics(topology)
    lines += ["", "Bandwidth (GB/s, one direction):", row("", heads)]
    for a in range(n):
        lines.append(
            row(
                f"GPU{a}",
                ["-" if a == b else f"{topology.bandwidth_gbps(a, b):g}" for b in range(n)],
            )
        )
    return "\n".join([*lines, "", LEGEND])


def render_nics(topology: Topology) -> list[str]:
    """The NIC legend and each GPU's nearest NIC (nothing on a node without RDMA NICs)."""
    if not topology.nic_count:
        return []
    lines = [
        "",
        "NIC Legend:",
        *(f"  NIC{k}: {name}" for k, name in enumerate(topology.nic_names)),
        "",
        "Nearest NIC:",
    ]
    for gpu in range(topology.gpu_count):
        k = topology.nearest_nic(gpu)
        assert k is not None  # the node has NICs
        level = topology.nic_level(gpu, k).short_name
        close = "GPUDirect-close" if topology.close_nics(gpu) else "no GPUDirect-close NIC"
        lines.append(f"  GPU{gpu}: NIC{k} ({topology.nic_names[k]}, {level}; {close})")
    return lines


def as_json(topology: Topology) -> dict[str, object]:
    n = topology.gpu_count
    return {
        "gpus": [
            {"index": i, "name": topology.gpu_names[i], "numa_node": topology.numa_nodes[i]}
            for i in range(n)
        ],
        "nics": [
            {
                "index": k,
                "name": name,
                "pcie_by_gpu": [topology.nic_level(g, k).short_name for g in range(n)],
                "close_gpus": [g for g in range(n) if k in topology.close_nics(g)],
            }
            for k, name in enumerate(topology.nic_names)
        ],
        "pairs": [
            {
                "a": a,
                "b": b,
                "link": topology.pair(a, b).label,
                "nvlinks": topology.pair(a, b).nvlinks,
                "via_nvswitch": topology.pair(a, b).via_nvswitch,
                "pcie": topology.pair(a, b).pcie_level.short_name,
                "same_numa": topology.pair(a, b).same_numa,
                "bandwidth_gbps": topology.bandwidth_gbps(a, b),
            }
            for a in range(n)
            for b in range(a + 1, n)
        ],
    }


def sharing_lines(composed: Composed) -> tuple[str, ...]:
    """The time-sliced resources and the isolation warning; nothing when the config shares no
    GPU."""
    node = composed.node
    memory = {gpu.uuid: gpu.memory_mib for gpu in node.gpus}
    memory.update(
        {d.uuid: d.memory_mib for devices in node.mig.devices_by_gpu.values() for d in devices}
    )
    return describe_sharing(node.advertised, memory)


def run(args: argparse.Namespace) -> int:
    try:
        with composed_node(args) as composed:
            topology = build_topology(composed.backend)
            mig_tree = render_mig_tree(composed.backend)
            sharing = sharing_lines(composed)
    except PluginError as error:
        return fail(error)
    if args.json:
        print(json.dumps(as_json(topology), indent=2))
        return 0
    print(render(topology))
    print()
    print(mig_tree)
    if sharing:
        print()
        print("\n".join(sharing))
    return 0
