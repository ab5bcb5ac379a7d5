"""Every subcommand's --help is complete: a description, and every flag says what it does (with its
default and environment variable where it has them); the shipped machines are listed where --machine
takes one; `run --mode` names what mode dra needs."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.cli import build_parser
from device_plugin.nvml.fake.catalog import shipped_machine_names

REPO = Path(__file__).resolve().parents[2]


def _walk(name: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """This parser and every nested subcommand's (`dra slices`)."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child_name, child in action.choices.items():
                yield from _walk(f"{name} {child_name}", child)


_, COMMANDS = build_parser()
PARSERS = dict(pair for name, parser in COMMANDS.items() for pair in _walk(name, parser))


def _flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


FLAGGED = {name: parser for name, parser in PARSERS.items() if _flags(parser)}
ENV_NAME = re.compile(r"env ([A-Z][A-Z0-9_]+)")


@pytest.mark.parametrize("name", sorted(PARSERS), ids=sorted(PARSERS))
def test_every_subcommand_has_a_description(name: str) -> None:
    description = PARSERS[name].description or ""
    assert len(description.split()) >= 5, f"`{name} --help` has no description: {description!r}"


@pytest.mark.parametrize("name", sorted(FLAGGED), ids=sorted(FLAGGED))
def test_every_flag_says_what_it_does_and_its_default(name: str) -> None:
    for action in _flags(FLAGGED[name]):
        flag = action.option_strings[-1]
        text = action.help or ""
        words = text.split("(", 1)[0].split()  # the description itself, before "(field ...; env ...)"
        assert len(words) >= 2, f"`{name} {flag}` has no description: {text!r}"
        has_default = action.default not in (None, False) and not action.required
        if has_default:
            assert "default" in text, f"`{name} {flag}` does not say its default {action.default!r}: {text!r}"


@pytest.mark.parametrize(
    "name", sorted(n for n, p in PARSERS.items() if any("--machine" in a.option_strings for a in p._actions))
)
def test_machine_flags_list_the_shipped_machines(name: str) -> None:
    (machine,) = [a for a in PARSERS[name]._actions if "--machine" in a.option_strings]
    missing = [m for m in shipped_machine_names() if m not in (machine.help or "")]
    assert not missing, f"`{name} --machine` does not list {missing}"


@pytest.mark.parametrize(
    ("flag", "words"),
    [("--mode", ("NODE_NAME", "KUBECONFIG", "PLUGIN_MODE")), ("--device-plugin-dir", ("DEVICE_PLUGIN_DIR", "default"))],
    ids=["mode-names-what-dra-needs", "plugin-dir-env-and-default"],
)
def test_run_flags_name_their_environment(flag: str, words: tuple[str, ...]) -> None:
    (action,) = [a for a in PARSERS["run"]._actions if flag in a.option_strings]
    assert all(word in (action.help or "") for word in words), action.help


@pytest.mark.parametrize("argv", [["run", "--help"], ["dra", "slices", "--help"]], ids=["run", "dra-slices"])
def test_help_prints_and_exits_zero(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "device_plugin.cli", *argv], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: gpu-device-plugin {' '.join(argv[:-1])}")


@pytest.mark.parametrize("name", list(COMMANDS), ids=list(COMMANDS))
def test_descriptions_read_alike(name: str) -> None:
    """Issue 32 item 10: half the descriptions were sentences (capital, full stop), half argparse's style."""
    text = COMMANDS[name].description or ""
    assert not text.endswith("."), text
    first = text.split()[0]
    assert first[0].islower() or first.isupper() or first == "Dynamic", text  # an acronym or a proper name may lead


@pytest.mark.parametrize("name", list(FLAGGED), ids=list(FLAGGED))
def test_each_flag_names_its_environment_variable_once_and_no_empty_default(name: str) -> None:
    for action in _flags(FLAGGED[name]):
        text = " ".join((action.help or "").split())
        for variable in set(ENV_NAME.findall(text)):
            assert text.count(f"env {variable}") == 1, f"{action.option_strings}: {text}"
        assert "default )" not in text and not text.endswith("default"), f"{action.option_strings}: {text}"
