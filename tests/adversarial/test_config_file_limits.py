"""A hostile or broken config file is refused at once, with one bounded line naming the field.

Reproduces issue 11: a 600-byte alias bomb expanded into gigabytes by a log line or an error message,
1,000-deep nesting ended in a RecursionError, a FIFO or /dev/zero at the config path hung start-up or
filled memory, and duplicate keys were silently accepted. Every case goes through load_config, the
daemon's own entry point, and runs in a helper thread so that a regression fails instead of hanging.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from device_plugin.config.loader import load_config
from device_plugin.core.errors import ConfigError
from testbed.hostile_yaml import alias_bomb, deep_block_mapping, indented

HANG_GUARD_S = 20.0  # not a performance bound: a hang fails the test instead of stopping the suite
MAX_MESSAGE = 300  # characters of str(ConfigError) for every case below
MIB = 1024 * 1024


BOMB = alias_bomb()
CASES: list[tuple[str, str, str, str]] = [
    # (id, file text, field named, words in the message)
    ("alias-bomb-in-accepted-section", f"version: v1\nflags:\n  gfd:\n{indented(BOMB, 4)}\n", "flags.gfd.l0", "anchor"),
    (
        "alias-bomb-as-wrongly-typed-value",
        f"version: v1\nbomb:\n{indented(BOMB, 2)}\nflags:\n  migStrategy: *l8\n",
        "bomb.l0",
        "anchors",
    ),
    ("one-harmless-anchor", "version: v1\nflags:\n  migStrategy: &m mixed\n", "flags.migStrategy", "anchor"),
    ("merge-key", "version: v1\nflags:\n  <<: {migStrategy: mixed}\n", "flags", "merge"),
    ("flow-nesting-100-deep", "version: v1\nflags:\n  gfd: " + "[" * 100 + "]" * 100 + "\n", "flags.gfd", "deeper"),
    # libyaml's parser stops at its own limit first (1,000 levels), with the same kind of one-line error.
    ("flow-nesting-1000-deep", "version: v1\nflags:\n  gfd: " + "[" * 1000 + "]" * 1000 + "\n", "", "nest"),
    ("flow-mapping-nesting-1000-deep", "version: v1\nflags: " + "{a: " * 1000 + "1" + "}" * 1000, "flags", "deeper"),
    ("block-nesting-1000-deep", deep_block_mapping(1000), "flags.gfd", "deeper"),
    ("duplicate-top-level-key", "version: v1\nflags: {}\nflags: {migStrategy: mixed}\n", "flags", "duplicate key"),
    (
        "duplicate-nested-key",
        "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: uuid\n    deviceIDStrategy: index\n",
        "flags.plugin.deviceIDStrategy",
        "duplicate key",
    ),
    (
        "duplicate-key-in-a-list-item",
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
        "      - name: nvidia.com/gpu\n        replicas: 2\n        replicas: 4\n",
        "sharing.timeSlicing.resources[0].replicas",
        "duplicate key",
    ),
    ("duplicate-key-spelled-as-two-numbers", "version: v1\nflags:\n  gfd: {1: a, 01: b}\n", "config file", "duplicate"),
    ("complex-key", "version: v1\nflags:\n  ? [a, b]\n  : 1\n", "flags", "plain string"),
    ("over-one-mib", "version: v1\n" + "#" * MIB + "\n", "config file", "larger than"),
    (
        "long-wrongly-typed-string",
        "version: v1\nflags:\n  migStrategy: " + "x" * 500_000 + "\n",
        "flags.migStrategy",
        "must be one of",
    ),
    # An explicit key (`? key`): YAML caps plain keys at 1,024 characters, not these.
    ("long-unknown-key", "version: v1\nflags:\n  ? " + "k" * 500_000 + "\n  : 1\n", "flags.kkkk", "unknown field"),
    ("invalid-yaml-on-a-long-line", "version: v1\nflags: [" + "a, " * 100_000 + "\n", "config file", "not valid YAML"),
]


def load_in_thread(load: Callable[[], Any]) -> ConfigError:
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = load()
        except BaseException as error:  # handed to the test thread
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    assert not thread.is_alive(), "loading the config hung"
    assert "value" not in outcome, "a hostile config was accepted"
    error = outcome["error"]
    assert isinstance(error, ConfigError), repr(error)[:500]
    return error


def assert_one_bounded_line(error: ConfigError) -> None:
    text = str(error)
    assert "\n" not in text and len(text) <= MAX_MESSAGE, text[:500]


@pytest.mark.parametrize(("text", "field", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_hostile_file_is_refused_with_one_bounded_line(tmp_path: Path, text: str, field: str, words: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    error = load_in_thread(lambda: load_config(config_file=path))
    assert_one_bounded_line(error)
    assert error.field.startswith(field), str(error)
    assert words in error.message, str(error)


def test_a_file_of_exactly_one_mib_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    head = "version: v1\nflags:\n  migStrategy: mixed\n"
    path.write_text(head + "#" * (MIB - len(head) - 1) + "\n")
    assert path.stat().st_size == MIB
    assert load_config(config_file=path).flags.mig_strategy == "mixed"


def test_nesting_within_the_limit_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(deep_block_mapping(20))  # flags.gfd is kept raw: any shape loads
    assert "k" in load_config(config_file=path).flags.gfd


def make_fifo(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    os.mkfifo(path)
    return path


def make_symlink_to_dev_zero(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.symlink_to("/dev/zero")
    return path


def make_directory(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.mkdir()
    return path


NOT_REGULAR = [
    ("fifo", make_fifo, "FIFO"),
    ("symlink-to-dev-zero", make_symlink_to_dev_zero, "character device"),
    ("dev-zero-itself", lambda _: Path("/dev/zero"), "character device"),
    ("directory", make_directory, "directory"),
]


@pytest.mark.parametrize(("make", "kind"), [c[1:] for c in NOT_REGULAR], ids=[c[0] for c in NOT_REGULAR])
def test_a_config_path_that_is_not_a_regular_file_is_refused_without_blocking(
    tmp_path: Path, make: Callable[[Path], Path], kind: str
) -> None:
    path = make(tmp_path)
    error = load_in_thread(lambda: load_config(config_file=path))
    assert_one_bounded_line(error)
    assert error.field == "config file" and kind in error.message, str(error)
