"""The command-line flags come from the config declarations: `--config` and `--mig-strategy` are declared
once and every command that loads the config takes them the same way, with the env var and default named."""

from __future__ import annotations

import argparse

import pytest

from device_plugin.cli import build_parser
from device_plugin.config.arguments import flag_help
from device_plugin.config.declare import Declared
from device_plugin.config.loader import load_effective_config
from device_plugin.config.model import CLI_SETTINGS
from device_plugin.core.errors import ConfigError

CONFIG_COMMANDS = ["run", "demo", "allocate", "labels", "topology", "dra slices"]


def parser_of(command: str) -> argparse.ArgumentParser:
    _, commands = build_parser()
    name, *sub = command.split()
    parser = commands[name]
    for word in sub:  # a nested subcommand (`dra slices`)
        (choices,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = choices.choices[word]
    return parser


def help_of(parser: argparse.ArgumentParser, flag: str) -> str:
    (action,) = [a for a in parser._actions if flag in a.option_strings]
    return str(action.help)


@pytest.mark.parametrize("command", CONFIG_COMMANDS, ids=[c.replace(" ", "-") for c in CONFIG_COMMANDS])
def test_every_config_command_takes_the_one_declared_config_flag(command: str) -> None:
    assert help_of(parser_of(command), "--config") == help_of(parser_of("run"), "--config")
    assert "env CONFIG_FILE" in help_of(parser_of(command), "--config")


@pytest.mark.parametrize(
    "command", ["demo", "allocate", "labels", "topology"], ids=["demo", "allocate", "labels", "topology"]
)
def test_mig_strategy_is_the_declared_flag_everywhere(command: str) -> None:
    assert help_of(parser_of(command), "--mig-strategy") == help_of(parser_of("run"), "--mig-strategy")


@pytest.mark.parametrize("declared", CLI_SETTINGS, ids=[d.path for d in CLI_SETTINGS])
def test_each_flag_help_names_its_field_env_and_default_from_the_declaration(declared: Declared) -> None:
    text = flag_help(declared)
    assert f"field {declared.path}" in text
    assert f"env {declared.setting.env}" in text
    assert "default " in text or declared.default is None


@pytest.mark.parametrize("value", ["", "  "], ids=["empty", "blank"])
def test_an_empty_config_flag_is_refused_naming_the_flag(value: str) -> None:
    args = parser_of("run").parse_args(["--config", value])
    with pytest.raises(ConfigError) as caught:
        load_effective_config(args, {})
    assert caught.value.field == "--config"
