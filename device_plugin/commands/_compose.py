"""Shared by demo, allocate, labels and topology: --config / --mig-strategy, and the node `run`
would serve.

The config is loaded exactly as `run` loads it (CLI > env > file, config/loader.py) and the
node is built by the daemon's composition root (composition.build_node), so these commands show what
the daemon would serve with the same machine and config: a MIG-enabled GPU is never offered whole,
MIG resources follow migStrategy, and time-slicing turns GPUs into replicas.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.arguments import add_config_file_argument, add_setting_arguments
from device_plugin.config.loader import load_effective_config
from device_plugin.config.model import Config
from device_plugin.config.not_applied import warn_not_applied
from device_plugin.dp.composition import Node, build_node
from device_plugin.nvml.protocol import NvmlBackend


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """`--config` and `--mig-strategy`, declared once (config/arguments.py), as `run` takes them."""
    add_config_file_argument(parser)
    add_setting_arguments(parser, ("flags.migStrategy",))


def load_cli_config(args: argparse.Namespace) -> Config:
    """The effective config `run` would load with these flags (ConfigError names the field), with
    `run`'s warning about NVIDIA fields that have no effect."""
    config = load_effective_config(args, os.environ)
    show_warnings()
    warn_not_applied(config)
    return config


@dataclass(frozen=True)
class Composed:
    backend: NvmlBackend
    config: Config
    node: Node

    def resource(self, name: str) -> ResourceManager | None:
        return next((r for r in self.node.resources if r.resource_name == name), None)

    def served(self) -> str:
        names = [r.resource_name for r in self.node.resources]
        return ", ".join(names) if names else "nothing"

    def whole_gpus(self, resource: ResourceManager) -> bool:
        """True when every device of `resource` is one whole GPU (not a replica, not a MIG
        device)."""
        return not resource.is_mig and resource.resource_name not in self.node.advertised.shared

    def not_served_whole(self) -> str:
        """Why some GPUs are no nvidia.com/gpu device: their MIG mode (empty when every GPU is
        served whole)."""
        enabled = sorted(self.node.mig.devices_by_gpu)
        return f"GPUs {', '.join(map(str, enabled))} have MIG enabled" if enabled else ""


def show_warnings() -> None:
    """The composition's warnings (a MIG-enabled GPU left out, a config note) on stderr, one line
    each. Left alone when logging is already set up (a test's capture, or `run`)."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)


@contextmanager
def composed_node(args: argparse.Namespace, config: Config | None = None) -> Iterator[Composed]:
    """Open the backend of --machine, build the node as the daemon does, close the backend
    afterwards."""
    # deferred: keeps `--help` free of NVML imports
    from device_plugin.nvml.backends import open_backend

    show_warnings()
    config = config if config is not None else load_cli_config(args)
    backend = open_backend(args.machine)
    try:
        yield Composed(backend, config, build_node(backend, config))
    finally:
        backend.close()
