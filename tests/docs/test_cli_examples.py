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
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"^ *```([^\n]*)\n(.*?)^ *```", flags=re.DOTALL | re.MULTILINE)
# The project's own commands; a plain (unlabelled) block counts as commands only if a line starts with one.
_OURS = re.compile(r"^(\.venv/bin/)?(gpu-device-plugin(\s|$)|python3? )")
ELLIPSIS = "..."
TIMEOUT_S = 120


@dataclass(frozen=True)
class Example:
    where: str  # file:line of the command
    command: str
    expected: tuple[str, ...]


def _blocks() -> list[tuple[Path, int, str, str]]:
    """(file, first line of the block's body, info string, body) of every fenced block but yaml/json."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            info = match.group(1).strip()
            if info in ("yaml", "json"):
                continue
            found.append((path, text.count("\n", 0, match.start()) + 2, info, match.group(2)))
    return found


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(REPO)}:{line}"


def console_examples() -> list[Example]:
    examples = []
    for path, first, info, body in _blocks():
        if info != "console":
            continue
        command: str | None = None
        start = 0
        expected: list[str] = []
        for offset, line in enumerate(body.splitlines()):
            if line.startswith("$ "):
                if command is not None:
                    examples.append(Example(_where(path, start), command, tuple(expected)))
                command, start, expected = line[2:].strip(), first + offset, []
            elif command is not None:
                expected.append(line.rstrip())
        if command is not None:
            examples.append(Example(_where(path, start), command, tuple(expected)))
    return examples


def other_commands() -> list[tuple[str, str]]:
    """(file:line, command) of every command line outside console blocks."""
    found = []
    for path, first, info, body in _blocks():
        if info == "console":
            continue
        lines = body.splitlines()
        if info not in ("sh", "bash") and not any(_OURS.match(line.strip()) for line in lines):
            continue  # output, a trace format, a layout: text, not commands
        pending, start = "", 0
        for offset, line in enumerate(lines):
            if not pending:
                start = offset
            pending += line.strip()
            if pending.endswith("\\"):  # continued on the next line
                pending = pending[:-1]
                continue
            if pending and not pending.startswith("#"):
                found.append((_where(path, first + start), pending))
            pending = ""
    return found


def prompts_outside_console() -> list[str]:
    return [
        _where(path, first + offset)
        for path, first, info, body in _blocks()
        if info != "console"
        for offset, line in enumerate(body.splitlines())
        if line.startswith("$ ")
    ]


def _subcommand(command: str) -> str:
    words = command.split()
    return words[1] if len(words) > 1 and words[0].endswith("gpu-device-plugin") else ""


def _is_ours(command: str) -> bool:
    return bool(_OURS.match(command))


# (id, why it is not run here, does it apply). The first rule that applies names the reason in the test id.
SKIP_RULES: tuple[tuple[str, str, Callable[[str], bool]], ...] = (
    (
        "synopsis",
        "a usage line with placeholders ([optional], NAME|FILE, <value>), not one command",
        lambda c: bool(re.search(r"\[|\bNAME\b|\bFILE\b|<[a-z]", c)),
    ),
    (
        "daemon",
        "`run` and `kubelet-standin` serve until SIGTERM; tests/integration drives both over real sockets",
        lambda c: _subcommand(c) in ("run", "kubelet-standin"),
    ),
    (
        "real-nvml",
        "reads this node's GPUs through NVML (no --machine): needs a GPU node",
        lambda c: _is_ours(c) and "--machine" not in c and "pytest" not in c,
    ),
    (
        "gpu-tests",
        "`pytest -m gpu` runs the backend contract on real NVML: needs a GPU node",
        lambda c: "pytest" in c and "-m gpu" in c,
    ),
    (
        "captured-sysfs",
        "reads a sysfs tree captured on a node (--sys-root); its test builds one",
        lambda c: "--sys-root" in c,
    ),
    (
        "tool-on-simulated-node",
        "tools/*.py with --machine: their own tests run them on simulated nodes (tests/tools)",
        lambda c: bool(re.match(r"(\.venv/bin/)?python3? tools/\w+\.py .*--machine", c)),
    ),
    (
        "make-target",
        "a make target: `make test` is the suite itself, `make venv` the set-up, `make demo` is the demo whose "
        "output docs/running.md quotes, `make image` needs a container builder",
        lambda c: c.startswith("make "),
    ),
    (
        "cluster",
        "kubectl, kind and image pushes need a cluster or a registry; deploy/ is validated offline by tests/deploy",
        lambda c: bool(re.match(r"(kubectl|kind|docker|podman|buildah)\b", c)) or "kubectl" in c,
    ),
    (
        "node-set-up",
        "nvidia-ctk (the NVIDIA Container Toolkit) writes the CDI spec on a GPU node; nothing to run here",
        lambda c: c.startswith("nvidia-ctk "),
    ),
    (
        "set-up",
        "prepares files for the example that follows (a directory, the overlay's registry)",
        lambda c: bool(re.match(r"(mkdir|sed -i|echo|pip install)\b", c)),
    ),
)


def skip_rule(command: str) -> str | None:
    return next((rule_id for rule_id, _, applies in SKIP_RULES if applies(command)), None)


def matches(expected: tuple[str, ...], printed: list[str]) -> bool:
    """Whether the quoted lines are what was printed, `...` lines standing for any lines (none included).

    The runs between `...` lines are consecutive lines of the output, in order; the first run starts at the
    first line printed and the last ends at the last, unless a `...` comes before or after them. The earliest
    place of each middle run leaves the most room for the runs after it, so the first fit decides.
    """
    quote = [line.rstrip() for line in expected]
    output = [line.rstrip() for line in printed]
    for lines in (quote, output):
        while lines and not lines[-1]:
            lines.pop()
    runs: list[list[str]] = [[]]
    for line in quote:
        if line == ELLIPSIS:
            runs.append([])
        else:
            runs[-1].append(line)
    if len(runs) == 1:
        return output == runs[0]
    first, *middle, last = runs
    if output[: len(first)] != first:
        return False
    position = len(first)
    for run in middle:
        found = next((s for s in range(position, len(output) - len(run) + 1) if output[s : s + len(run)] == run), None)
        if found is None:
            return False
        position = found + len(run)
    tail = len(output) - len(last)
    return tail >= position and output[tail:] == last


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


@pytest.mark.parametrize(
    ("expected", "printed", "verdict"),
    [
        (("a", "b"), ["a", "b"], True),
        (("a", "b"), ["a", "b", "c"], False),
        (("b", "c"), ["a", "b", "c"], False),
        (("a", ELLIPSIS, "c"), ["a", "b", "x", "c"], True),
        (("a", ELLIPSIS), ["a", "b"], True),
        ((ELLIPSIS, "c", "d", ELLIPSIS), ["a", "c", "x", "c", "d", "e"], True),
        ((ELLIPSIS, "c", "d", ELLIPSIS), ["c", "x", "d"], False),
        (("a", ELLIPSIS, "b", ELLIPSIS, "a"), ["a", "a", "b"], False),
        (("a  ",), ["a", ""], True),
        (("a", "b"), ["a", "B"], False),
    ],
    ids=[
        "identical",
        "unquoted-extra-line-at-the-end",
        "unquoted-extra-line-at-the-start",
        "ellipsis-skips-lines",
        "trailing-ellipsis-skips-the-rest",
        "runs-are-consecutive",
        "a-run-split-by-other-lines-fails",
        "runs-keep-their-order",
        "trailing-blanks-ignored",
        "a-changed-line-fails",
    ],
)
def test_quote_matching(expected: tuple[str, ...], printed: list[str], verdict: bool) -> None:
    assert matches(expected, printed) is verdict


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("gpu-device-plugin topology --machine dgx1-v100", None),
        (".venv/bin/gpu-device-plugin topology", "real-nvml"),
        ("gpu-device-plugin run --machine dgx1-v100 --device-plugin-dir /tmp/dp", "daemon"),
        ("gpu-device-plugin allocate --machine M --size 2 [--json]", "synopsis"),
        ("kubectl apply -k deploy/overlays/image", "cluster"),
        ("nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml", "node-set-up"),
        (".venv/bin/python tools/real_node_check.py", "real-nvml"),
        ("gpu-device-plugin labels --machine dgx1-v100", None),
    ],
    ids=[
        "runnable-on-a-shipped-machine",
        "no-machine-is-real-nvml",
        "run-is-a-daemon",
        "placeholders-are-a-synopsis",
        "kubectl-needs-a-cluster",
        "nvidia-ctk-is-gpu-node-set-up",
        "tool-without-machine-is-real-nvml",
        "labels-on-a-shipped-machine-runs",
    ],
)
def test_skip_rules(command: str, rule: str | None) -> None:
    assert skip_rule(command) == rule
