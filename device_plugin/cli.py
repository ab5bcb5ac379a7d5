"""The `gpu-device-plugin` console script: parses the subcommand and hands over to its module.

For `run`, signal handlers go in as this module is imported, before anything else of ours (the
subcommand modules: gRPC, prometheus-client and YAML take a few hundred ms; importlib.metadata for
the version alone took 30 ms): a SIGHUP or SIGINT in that window must not kill the daemon or print a
traceback. Only the interpreter's own start (about 25 ms in a virtualenv) comes before.
A mistyped flag is reported by the subcommand it was given to (its usage, and the closest flag it
has); output into a pipe that closes early (`| head`) ends the command quietly.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from device_plugin.process import signals as process_signals


def command_word(argv: Sequence[str]) -> str | None:
    """The subcommand: the first word that is not a flag."""
    return next((word for word in argv if not word.startswith("-")), None)


# the console script's argv: caught before the imports below
if command_word(sys.argv[1:]) == "run":
    process_signals.install()

import argparse  # noqa: E402
import difflib  # noqa: E402
import importlib  # noqa: E402
import os  # noqa: E402

from device_plugin.commands import COMMAND_MODULES  # noqa: E402
from device_plugin.core.version import package_version  # noqa: E402


def build_parser(
    only: str | None = None,
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser, and each subcommand's own parser by name (to report its mistyped
    flags).

    `only`: a subcommand's NAME; then only its module is imported and only its parser is built."""
    parser = argparse.ArgumentParser(
        prog="gpu-device-plugin",
        description="Kubernetes device plugin for NVIDIA GPUs (topology-aware, MIG, sharing, "
        "health recovery).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = {}
    for name, module_name in COMMAND_MODULES.items():
        if only is not None and name != only:
            continue
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(
            module.NAME, help=module.HELP, description=module.HELP, allow_abbrev=False
        )
        module.add_arguments(sub)
        sub.set_defaults(handler=module.run)
        commands[module.NAME] = sub
    return parser, commands


def unknown_arguments_message(command: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """'unrecognized arguments: --machnie (did you mean --machine?)', from the subcommand's own
    flags."""
    flags = [s for action in command._actions for s in action.option_strings if s.startswith("--")]
    parts = []
    for word in unknown:
        close = difflib.get_close_matches(word.split("=", 1)[0], flags, n=1, cutoff=0.6)
        parts.append(
            f"{word} (did you mean {close[0]}?)" if word.startswith("-") and close else word
        )
    return "unrecognized arguments: " + " ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if command_word(given) == "run":  # main() called with its own argv (tests, tools): idempotent
        process_signals.install()
    # A subcommand given first is the only one built; anything else (`-h run`, a typo) gets every
    # one, for help.
    first = given[0] if given else None
    parser, commands = build_parser(first if first in COMMAND_MODULES else None)
    args, unknown = parser.parse_known_args(argv)
    command = commands.get(getattr(args, "command", None) or "")
    if unknown:
        (command or parser).error(unknown_arguments_message(command or parser, unknown))
    # every message and the config watch name it in full, whatever the cwd
    if getattr(args, "config", None):
        args.config = os.path.abspath(args.config)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.handler(args))
    except BrokenPipeError:
        # The reader went away (`| head`): nothing more to say. Point stdout at /dev/null so the
        # interpreter's final flush does not raise again on the closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
