"""How long the config loader takes to refuse hostile files, and to load a full 1 MiB one. Prints; asserts nothing.

Run: .venv/bin/python benchmarks/bench_config_limits.py
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from device_plugin.config.loader import load_config
from device_plugin.core.errors import ConfigError
from testbed.hostile_yaml import alias_bomb, deep_block_mapping, indented

MIB = 1024 * 1024


def cases() -> list[tuple[str, str]]:
    bomb = f"version: v1\nflags:\n  gfd:\n{indented(alias_bomb(), 4)}\n"
    big_gfd = "version: v1\nflags:\n  gfd:\n" + "".join(f"    key{i}: {'v' * 60}\n" for i in range(13_000))
    return [
        (f"alias bomb ({len(bomb)} bytes, 9^9 strings if expanded)", bomb),
        ("1,000-deep block nesting", deep_block_mapping(1000)),
        ("duplicate key after 1 MiB of comments", "version: v1\n" + "#" * (MIB - 100) + "\nversion: v1\nversion: v1\n"),
        ("file just over 1 MiB", "version: v1\n" + "#" * MIB + "\n"),
        (f"valid flags.gfd section of {len(big_gfd) // 1024} KiB (loads)", big_gfd),
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        for name, text in cases():
            path.write_text(text)
            started = time.perf_counter()
            try:
                load_config(config_file=path)
                outcome = "loaded"
            except ConfigError as error:
                outcome = f"refused ({len(str(error))}-char message)"
            elapsed_ms = (time.perf_counter() - started) * 1000
            print(f"{name:58s} {elapsed_ms:8.1f} ms  {outcome}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
