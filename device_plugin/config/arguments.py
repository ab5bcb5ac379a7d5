"""The command-line flags, derived from the config declarations: `--config` and one flag per
declared setting.

Every command that loads the config (`run`, and `demo`, `allocate`, `labels`, `topology`, `dra
slices`, which show what `run` would serve) adds its flags here, so a flag, its environment variable
and its default are written once, on the declaration (config/declare.py), and the help text names
them from it. An absent flag has no argparse default: it leaves the environment and the file in
charge (config/loader.py applies CLI > env > file > default).

Boundary: argparse wiring only; the values are parsed by the loader like the environment's.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from device_plugin.config.declare import CliFlag, Declared
from device_plugin.config.model import CLI_SETTINGS
from device_plugin.config.schema import CONFIG_FILE_ENV

CONFIG_FILE_FLAG = CliFlag(
    "--config", "config file, NVIDIA's `version: v1` format (YAML or JSON)", "FILE"
)


def add_config_file_argument(parser: argparse.ArgumentParser) -> None:
    """`--config FILE` (else the CONFIG_FILE environment variable; neither: defaults, env and flags
    only)."""
    flag = CONFIG_FILE_FLAG
    parser.add_argument(
        flag.flag, metavar=flag.metavar, help=f"{flag.help} (env {CONFIG_FILE_ENV}; default: none)"
    )


def add_setting_arguments(
    parser: argparse.ArgumentParser, paths: Iterable[str] | None = None
) -> None:
    """One flag per declared setting that has one (only those at `paths`, dotted field paths, if
    given)."""
    wanted = None if paths is None else set(paths)
    for declared in CLI_SETTINGS:
        if wanted is not None and declared.path not in wanted:
            continue
        cli = declared.setting.cli
        assert cli is not None
        extra: dict[str, Any] = {"nargs": "?", "const": "true"} if cli.optional_value else {}
        parser.add_argument(cli.flag, metavar=cli.metavar, help=flag_help(declared), **extra)
    if wanted is not None:
        missing = wanted - {d.path for d in CLI_SETTINGS}
        assert not missing, f"no declared flag for {sorted(missing)}"


def flag_help(declared: Declared) -> str:
    """The declaration's help text, with its config field, environment variable and default."""
    cli = declared.setting.cli
    assert cli is not None
    notes = [f"field {declared.path}"]
    if declared.setting.env:
        notes.append(f"env {declared.setting.env}")
    default = _default_text(declared.default)
    if default is not None:
        notes.append(f"default {default}")
    text = f"{cli.help} ({'; '.join(notes)})" if cli.help else f"({'; '.join(notes)})"
    return text.replace("%", "%%")  # argparse formats help with %


def _default_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value) or "none"
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value == "":
        return '"" (off)'
    return str(value)
