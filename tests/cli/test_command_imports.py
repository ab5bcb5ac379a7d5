"""The CLI imports only the module of the subcommand it was given (each tool start is a process of its own).

COMMAND_MODULES names each module by its subcommand; the table must agree with the modules' own NAME,
and a subcommand that is not the DRA driver's must start without loading the DRA stack (the
`kubernetes` client) or any other subcommand's module.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from device_plugin.cli import build_parser, main
from device_plugin.commands import COMMAND_MODULES


@pytest.mark.parametrize("name", list(COMMAND_MODULES), ids=list(COMMAND_MODULES))
def test_the_table_names_each_module_by_its_own_subcommand(name: str) -> None:
    assert name == importlib.import_module(COMMAND_MODULES[name]).NAME


def test_every_subcommand_is_built_for_top_level_help() -> None:
    _, commands = build_parser()
    assert list(commands) == list(COMMAND_MODULES)


@pytest.mark.parametrize("name", ["run", "topology", "allocate", "labels"], ids=lambda n: f"{n}-alone")
def test_one_subcommand_loads_its_module_only_and_no_kubernetes_client(name: str) -> None:
    probe = (
        "import sys\n"
        "from device_plugin.cli import build_parser\n"
        "from device_plugin.commands import COMMAND_MODULES\n"
        f"_, commands = build_parser({name!r})\n"
        "others = [m for n, m in COMMAND_MODULES.items() if m in sys.modules and n != " + repr(name) + "]\n"
        "print(sorted(commands), others, 'kubernetes' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split("\n")[0] == f"[{name!r}] [] False", out.stderr


def test_help_asked_before_a_subcommand_still_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["-h", "run"])
    listed = capsys.readouterr().out
    assert all(name in listed for name in COMMAND_MODULES), listed
