"""`gpu-device-plugin labels`: print this node's labels, or write them as an NFD features.d file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from device_plugin.errors import PluginError
from device_plugin.labels import MIG_STRATEGIES, FeaturesFileWriter, LabelOptions, compute_labels, format_features_file

NAME = "labels"
HELP = "Print the node labels (GFD keys plus topology), or write them to a node-feature-discovery features.d file."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--machine",
        metavar="M",
        help="a shipped machine name or a machine-description file (default: the real GPUs through NVML)",
    )
    parser.add_argument(
        "--output",
        metavar="FILE",
        type=Path,
        help="write the labels to FILE atomically, only when they changed "
        "(e.g. /etc/kubernetes/node-feature-discovery/features.d/gpu-device-plugin); default: print them",
    )
    parser.add_argument(
        "--mig-strategy", choices=MIG_STRATEGIES, default="none", help="value of nvidia.com/mig.strategy"
    )
    parser.add_argument("--machine-type", metavar="NAME", help="value of nvidia.com/gpu.machine (DMI product name)")


def run(args: argparse.Namespace) -> int:
    from device_plugin.nvml.catalog import open_backend  # deferred: keeps `--help` free of NVML imports

    try:
        backend = open_backend(args.machine)
    except PluginError as error:
        print(f"gpu-device-plugin labels: {error}", file=sys.stderr)
        return 2
    try:
        labels = compute_labels(backend, LabelOptions(mig_strategy=args.mig_strategy, machine_type=args.machine_type))
    except PluginError as error:
        print(f"gpu-device-plugin labels: {error}", file=sys.stderr)
        return 1
    finally:
        backend.close()
    if args.output is None:
        sys.stdout.write(format_features_file(labels))
        return 0
    try:
        changed = FeaturesFileWriter(args.output).write(labels)
    except OSError as error:
        print(f"gpu-device-plugin labels: cannot write {args.output}: {error}", file=sys.stderr)
        return 1
    print(f"{args.output}: {'written' if changed else 'unchanged'} ({len(labels)} labels)")
    return 0
