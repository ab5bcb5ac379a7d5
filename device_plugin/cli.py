"""The `gpu-device-plugin` console script: parses the subcommand and hands over to its module.

For `run`, signal handlers go in before the subcommand modules are imported (gRPC, prometheus-client
and YAML take a few hundred ms to load): a SIGHUP or SIGINT in that window must not kill the daemon.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from device_plugin.commands import COMMAND_MODULES
from device_plugin.process import signals as process_signals


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-device-plugin",
        description="Kubernetes device plugin for NVIDIA GPUs (topology-aware, MIG, sharing, health recovery).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = [w for w in (sys.argv[1:] if argv is None else argv) if not w.startswith("-")]
    if words[:1] == ["run"]:
        process_signals.install()
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return 2
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
