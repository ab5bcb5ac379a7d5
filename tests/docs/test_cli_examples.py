"""Every CLI example in README.md and docs/*.md runs here and prints what the doc quotes, or is skipped by a rule.

Quoted output lives in a fenced `console` block: each `$ ` line is a command, and the lines after it (up to
the next `$ ` line or the fence) are what it prints, stdout and stderr together. A line that is only `...`
stands for any number of lines (the doc abbreviates); every other line must appear as printed, in order,
trailing blanks ignored. Each command runs through bash in the repository root, with this checkout's
console script first on PATH, so `gpu-device-plugin` is the code under test.

Every other command line in a fenced block (a `sh` block, or a plain block that names the CLI) must match
one rule of SKIP_RULES, which says why it cannot run without a GPU node or a cluster; a command no rule
covers fails the test, so a new example is either quoted and checked or skipped for a stated reason, never
left out by accident. A `$ ` line outside a `console` block fails too: quoted output that nothing reads.

Reading the docs, SKIP_RULES and the quote matching are tests/docs/doc_commands.py; the matching and the
rules on hand-made cases, tests/docs/test_cli_example_rules.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.doc_commands import (
    REPO,
    Example,
    console_examples,
    matches,
    other_commands,
    prompts_outside_console,
    skip_rule,
)

TIMEOUT_S = 120

EXAMPLES = console_examples()
OTHERS = other_commands()


def _run(command: str) -> list[str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "100"}
    for name in ("CONFIG_FILE", "MIG_STRATEGY", "NODE_NAME", "KUBECONFIG"):
        env.pop(name, None)  # the examples show the defaults, not this shell's settings
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    return done.stdout.splitlines()


def test_the_docs_quote_cli_output() -> None:
    assert len(EXAMPLES) >= 8, [e.where for e in EXAMPLES]
    assert all(example.expected for example in EXAMPLES), "a console command must quote what it prints"


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"{e.where}:{e.command[:60]}" for e in EXAMPLES])
def test_console_example_prints_what_the_doc_quotes(example: Example) -> None:
    printed = _run(example.command)
    quoted = "\n".join(example.expected)
    assert matches(example.expected, printed), (
        f"{example.where}: `{example.command}` printed\n" + "\n".join(printed) + f"\n\nthe doc quotes\n{quoted}"
    )


@pytest.mark.parametrize(
    ("where", "command"), OTHERS, ids=[f"{w}:{skip_rule(c) or 'NO-RULE'}:{c[:50]}" for w, c in OTHERS]
)
def test_every_other_command_is_skipped_by_a_rule(where: str, command: str) -> None:
    assert skip_rule(command) is not None, (
        f"{where}: `{command}` is neither quoted in a console block nor covered by a rule of SKIP_RULES"
    )


def test_no_prompt_outside_a_console_block() -> None:
    assert prompts_outside_console() == []
