"""Shared by the subcommands: --machine (and its help, which lists the shipped machines), building
the Allocator."""

from __future__ import annotations

import argparse
import sys

from device_plugin.core.ascii_digits import is_ascii_digits
from device_plugin.core.errors import ConfigError, InvalidRequestError, PluginError
from device_plugin.gpu_sets import Allocator
from device_plugin.nvml.backends import open_backend
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.topology.build import build_topology
from device_plugin.topology.model import Topology

EXIT_INVALID = 2


def machine_help(default: str = "this node's GPUs through NVML") -> str:
    """--machine's help: the shipped machines by name, so that --help alone shows what can be
    simulated."""
    return (
        f"a shipped machine ({', '.join(shipped_machine_names())}) or a machine-description file; "
        f"default: {default}"
    )


def add_machine_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--machine", metavar="NAME|FILE", help=machine_help())


def load_topology(machine: str | None) -> Topology:
    backend = open_backend(machine)
    try:
        return build_topology(backend)
    finally:
        backend.close()


def parse_indices(text: str | None, flag: str) -> list[int] | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not all(is_ascii_digits(p) for p in parts):
        raise InvalidRequestError(f"{flag}: {text!r} is not a comma-separated list of GPU indices")
    return [int(p) for p in parts]


def fail(error: PluginError) -> int:
    """Print the error; exit 2 for invalid input (request, machine, trace), 1 for a runtime
    failure."""
    print(f"error: {error}", file=sys.stderr)
    return EXIT_INVALID if isinstance(error, InvalidRequestError | ConfigError) else 1


def build_allocator(machine: str | None) -> Allocator:
    return Allocator(load_topology(machine))
