"""`gpu-device-plugin topology`: the node's GPU topology, nvidia-smi topo -m style, with bandwidths.

With a config that time-slices GPUs (--config, as `run` takes it), the shared resources follow, with
the warning that time-slicing isolates nothing; without one, no such warning.
"""

from __future__ import annotations

import argparse
import json

from device_plugin.commands._compose import Composed, add_config_arguments, composed_node
from device_plugin.commands._machine import add_machine_argument, fail
from device_plugin.errors import PluginError
from device_plugin.topology import Topology
from device_plugin.topology_build import build_topology
from mig.render import render_mig_tree
from timeslice import describe_sharing

NAME = "topology"
HELP = "print the GPU topology matrix (NVLink / NVSwitch / PCIe level, NUMA) and per-pair bandwidth"

LEGEND = """Legend:
  X     = self
  NV#   = # direct NVLinks          NVS#  = # NVLinks through NVSwitch
  PIX   = one PCIe switch           PXB   = several PCIe switches
  PHB   = a PCIe host bridge        NODE  = host bridges of one NUMA node
  SYS   = across the CPU interconnect
Bandwidth: one direction, GB/s, from the facts table (README, device_plugin/topology_facts.py)."""


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

    lines = [row("", [*heads, "NUMA"])]
    for a in range(n):
        cells = ["X" if a == b else topology.pair(a, b).label for b in range(n)]
        numa = topology.numa_nodes[a]
        lines.append(row(f"GPU{a}", [*cells, "N/A" if numa is None else str(numa)]))
    lines += ["", "Bandwidth (GB/s, one direction):", row("", heads)]
    for a in range(n):
        lines.append(row(f"GPU{a}", ["-" if a == b else f"{topology.bandwidth_gbps(a, b):g}" for b in range(n)]))
    return "\n".join([*lines, "", LEGEND])


def as_json(topology: Topology) -> dict[str, object]:
    n = topology.gpu_count
    return {
        "gpus": [{"index": i, "name": topology.gpu_names[i], "numa_node": topology.numa_nodes[i]} for i in range(n)],
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
    """The time-sliced resources and the isolation warning; nothing when the config shares no GPU."""
    node = composed.node
    memory = {gpu.uuid: gpu.memory_mib for gpu in node.gpus}
    memory.update({d.uuid: d.memory_mib for devices in node.mig.devices_by_gpu.values() for d in devices})
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
