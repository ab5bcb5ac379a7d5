"""Config files built to hurt a parser: an alias bomb, deep nesting; for the config-limits tests and their
benchmark (tests/adversarial/test_config_file_limits.py, benchmarks/bench_config_limits.py)."""

from __future__ import annotations


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A "billion laughs" mapping: `width ** levels` strings from a few hundred bytes."""
    lines = ["l0: &l0 [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return "\n".join(lines)


def indented(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


def deep_block_mapping(depth: int) -> str:
    return (
        "version: v1\nflags:\n  gfd:\n"
        + "".join(f"{'  ' * (level + 2)}k:\n" for level in range(depth))
        + ("  " * (depth + 2) + "end: 1\n")
    )
