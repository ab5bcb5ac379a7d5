"""Helpers shared by the benchmark scripts: percentiles and plain-text tables."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

# Benchmarks run as scripts from a checkout: make the package importable without installing.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def target_line(what: str, met: bool) -> str:
    """How every benchmark states a target: printed, never an exit status (`make bench` never fails)."""
    return f"target {what}: {'met' if met else 'missed'}"


def quiet_rounds(doc: str, default: int = 5) -> int:
    """`--rounds N` from the command line (the script's docstring's first line as the help), with the daemons'
    log lines silenced: a benchmark that runs whole daemons prints its table only."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=default)
    rounds = int(parser.parse_args().rounds)
    logging.basicConfig(level=logging.CRITICAL)
    return rounds
