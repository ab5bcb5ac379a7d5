"""Read-only check: does NVML's GPU-GPU PCIe level agree with the sysfs path rule that ranks GPU-NIC pairs?

Usage (on a GPU node, from the checkout): .venv/bin/python tools/pcie_level_check.py [--sys-root DIR]
(`--machine NAME` runs it on a simulated machine, whose NVML answers by the path rule, so every pair
agrees; `--machine NAME --sys-root DIR` compares that machine's GPU levels with the paths of a sysfs tree
captured under DIR. The test suite does both, so the tool cannot rot.)

On a real node the plugin takes GPU-GPU levels from NVML (nvmlDeviceGetTopologyCommonAncestor) and
GPU-NIC levels from sysfs paths (device_plugin/nvml/pcie_paths.py: same switch PIX, a shared switch
PXB, the same root bus PHB, the same NUMA node NODE, else SYS). This tool ranks every GPU pair both ways
and prints the pairs where they differ, with both paths, so an operator can tell whether the two rules
tell one story on this node. It opens NVML and reads sysfs; it changes nothing. Exit 0 when every pair
agrees, 1 when some differ or a GPU's path is unknown, 2 when NVML cannot be opened.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from device_plugin.core.errors import NvmlUnavailableError, PluginError  # noqa: E402
from device_plugin.nvml.backends import open_backend  # noqa: E402
from device_plugin.nvml.pcie_paths import pcie_level_of_paths  # noqa: E402
from device_plugin.nvml.protocol import NicSource, NvmlBackend  # noqa: E402
from device_plugin.nvml.sysfs_nics import SysfsNics  # noqa: E402
from device_plugin.nvml.types import PcieLevel  # noqa: E402


@dataclass(frozen=True)
class PairLevels:
    """One GPU pair ranked both ways; `by_paths` is None when either GPU's path is unknown."""

    a: int
    b: int
    by_nvml: PcieLevel
    by_paths: PcieLevel | None
    path_a: tuple[str, ...] | None
    path_b: tuple[str, ...] | None

    @property
    def agrees(self) -> bool:
        return self.by_paths == self.by_nvml


def compare(backend: NvmlBackend, paths: NicSource) -> list[PairLevels]:
    """Every GPU pair of `backend`, NVML's level next to the path rule's over `paths`' PCIe paths."""
    gpus = backend.gpus()
    known = {gpu.index: paths.pcie_path(gpu.pci_bus_id) for gpu in gpus}
    out = []
    for first, second in combinations(gpus, 2):
        a, b = first.index, second.index
        path_a, path_b = known[a], known[b]
        by_paths = pcie_level_of_paths(path_a, path_b) if path_a and path_b else None
        out.append(PairLevels(a, b, backend.pcie_level(a, b), by_paths, path_a, path_b))
    return out


def report(pairs: list[PairLevels]) -> list[str]:
    """Lines for the pairs that disagree, then a summary line."""
    lines = []
    for pair in pairs:
        if pair.agrees:
            continue
        by_paths = pair.by_paths.short_name if pair.by_paths is not None else "unknown"
        lines.append(
            f"GPU{pair.a}-GPU{pair.b}: NVML {pair.by_nvml.short_name}, paths {by_paths}"
            f"  ({'/'.join(pair.path_a or ('?',))} | {'/'.join(pair.path_b or ('?',))})"
        )
    differ = sum(1 for p in pairs if not p.agrees and p.by_paths is not None)
    unknown = sum(1 for p in pairs if p.by_paths is None)
    lines.append(f"{len(pairs)} GPU pairs: {len(pairs) - differ - unknown} agree, {differ} differ, {unknown} unknown")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machine", help="a simulated machine instead of this node's real NVML")
    parser.add_argument("--sys-root", type=Path, help="the sysfs tree to read paths from (default: /sys)")
    args = parser.parse_args(argv)
    try:
        backend = open_backend(args.machine, sys_root=args.sys_root or Path("/sys"))
    except NvmlUnavailableError as error:
        print(f"NVML is unavailable: {error}", file=sys.stderr)
        return 2
    except PluginError as error:  # an unknown or broken machine description
        print(f"cannot load machine {args.machine}: {error}", file=sys.stderr)
        return 2
    try:
        if args.sys_root is not None and args.machine is not None:
            paths: NicSource = SysfsNics(args.sys_root)
        elif isinstance(backend, NicSource):
            paths = backend
        else:
            print("this backend hands up no PCIe paths", file=sys.stderr)
            return 2
        pairs = compare(backend, paths)
    except PluginError as error:
        print(f"cannot read the GPUs: {error}", file=sys.stderr)
        return 2
    finally:
        backend.close()
    print("\n".join(report(pairs)))
    return 0 if all(p.agrees for p in pairs) else 1


if __name__ == "__main__":
    sys.exit(main())
