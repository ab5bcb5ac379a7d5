"""The commands in README.md and docs/*.md, read for tests/docs/test_cli_examples.py (whose docstring states
the conventions): the `console` examples with the output they quote, every other command line, `$ ` prompts
outside a console block; SKIP_RULES, which say why a command is not run here; and how a quote matches what
was printed (`...` lines standing for any lines).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"^ *```([^\n]*)\n(.*?)^ *```", flags=re.DOTALL | re.MULTILINE)
# The project's own commands; a plain (unlabelled) block counts as commands only if a line starts with one.
_OURS = re.compile(r"^(\.venv/bin/)?(gpu-device-plugin(\s|$)|python3? )")
ELLIPSIS = "..."


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
        "kubectl, kind, helm and image pushes need a cluster or a registry; deploy/ is validated offline by "
        "tests/deploy",
        lambda c: bool(re.match(r"(kubectl|kind|helm|docker|podman|buildah)\b", c)) or "kubectl" in c,
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
    (
        "machine-set-up",
        "installs packages or fetches release binaries on a development machine (.ci/run does it in CI)",
        lambda c: bool(re.match(r"(apt-get|curl|tar|export)\b", c)),
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
