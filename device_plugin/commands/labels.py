"""`gpu-device-plugin labels`: print this node's labels, or write them as an NFD features.d file.

The labels are the ones the daemon writes: the node is composed as `run` composes it
(commands._compose, same --config / --mig-strategy), so MIG per-profile labels and time-slicing
labels are included.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from device_plugin.commands._compose import add_config_arguments, composed_node
from device_plugin.commands._machine import add_machine_argument
from device_plugin.config.model import DEFAULT_DEVICE_PLUGIN_DIR
from device_plugin.config.safe_write import kubelet_owned_dirs
from device_plugin.core.errors import ConfigError, PluginError
from device_plugin.observability.labels import (
    FeaturesFileWriter,
    compute_labels,
    format_features_file,
)

NAME = "labels"
HELP = (
    "print the node labels (GFD keys plus topology), or write them to a node-feature-discovery "
    "features.d file"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_machine_argument(parser)
    parser.add_argument(
        "--output",
        metavar="FILE",
        type=Path,
        help="write the labels to FILE atomically, only when they changed "
        "(e.g. /etc/kubernetes/node-feature-discovery/features.d/gpu-device-plugin); default: "
        "print them",
    )
    add_config_arguments(parser)
    parser.add_argument(
        "--machine-type", metavar="NAME", help="value of nvidia.com/gpu.machine (DMI product name)"
    )


def run(args: argparse.Namespace) -> int:
    from device_plugin.dp.resource_reporting import (
        label_options,  # deferred: keeps `--help` free of the daemon's imports
    )

    try:
        with composed_node(args) as composed:
            options = replace(
                label_options(composed.node, composed.config), machine_type=args.machine_type
            )
            allocator = composed.node.allocator
            labels = compute_labels(
                composed.backend, options, allocator.topology if allocator is not None else None
            )
            plugin_dir = composed.config.daemon.device_plugin_dir
    except ConfigError as error:  # a bad machine, config or flag
        print(f"error: {error}", file=sys.stderr)
        return 2
    except PluginError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.output is None:
        sys.stdout.write(format_features_file(labels))
        return 0
    try:
        # Never into the kubelet's directories: the default ones, and those of the configured
        # devicePluginDir.
        refused = (*kubelet_owned_dirs(DEFAULT_DEVICE_PLUGIN_DIR), *kubelet_owned_dirs(plugin_dir))
        changed = FeaturesFileWriter(args.output, refuse_under=refused, field="--output").write(
            labels
        )
    # a directory, FIFO or device at the path, or inside the kubelet's directory
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: cannot write {args.output}: {error}", file=sys.stderr)
        return 1
    print(
        f"{args.output.absolute()}: {'written' if changed else 'unchanged'} ({len(labels)} labels)"
    )
    return 0
