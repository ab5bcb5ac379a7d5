"""The config watch reports what can change the config path's content, and nothing written beside it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from device_plugin.config.watch import ConfigFileWatch, relevant_names
from tests.daemon.harness import WAIT_S

SIBLING_WRITES = 200  # a log file beside the config, written line by line


class Calls:
    def __init__(self) -> None:
        self.count = 0
        self.seen = threading.Event()

    def __call__(self) -> None:
        self.count += 1
        self.seen.set()


def plain_file(folder: Path) -> Path:
    config = folder / "config.yaml"
    config.write_text("version: v1\n")
    return config


def link_to_sibling(folder: Path) -> Path:
    (folder / "real.yaml").write_text("version: v1\n")
    (folder / "config.yaml").symlink_to("real.yaml")
    return folder / "config.yaml"


def configmap_mount(folder: Path) -> Path:
    (folder / "..ts1").mkdir()
    (folder / "..ts1" / "config.yaml").write_text("version: v1\n")
    (folder / "..data").symlink_to("..ts1")
    (folder / "config.yaml").symlink_to("..data/config.yaml")
    return folder / "config.yaml"


def edit_in_place(config: Path) -> None:
    config.write_text("version: v1\nflags: {migStrategy: mixed}\n")


def swap_configmap(config: Path) -> None:
    folder = config.parent
    (folder / "..ts2").mkdir()
    (folder / "..ts2" / "config.yaml").write_text("version: v1\nflags: {migStrategy: mixed}\n")
    (folder / "..data_tmp").symlink_to("..ts2")
    os.replace(folder / "..data_tmp", folder / "..data")


def replace_by_rename(config: Path) -> None:
    staged = config.with_name(".config.yaml.tmp")
    staged.write_text("version: v1\nflags: {migStrategy: mixed}\n")
    os.replace(staged, config)


LAYOUTS: list[tuple[str, Callable[[Path], Path], Callable[[Path], None]]] = [
    ("plain-file-edited", plain_file, edit_in_place),
    ("plain-file-replaced-by-rename", plain_file, replace_by_rename),
    ("symlink-to-a-sibling-whose-target-is-edited", link_to_sibling, edit_in_place),
    ("configmap-data-link-swapped", configmap_mount, swap_configmap),
]


@pytest.mark.parametrize(("make", "change"), [(m, c) for _, m, c in LAYOUTS], ids=[i for i, _, _ in LAYOUTS])
def test_a_change_of_the_config_is_reported_and_writes_beside_it_are_not(
    tmp_path: Path, make: Callable[[Path], Path], change: Callable[[Path], None]
) -> None:
    config = make(tmp_path)
    calls = Calls()
    watch = ConfigFileWatch(config, calls)
    watch.start()
    try:
        with (tmp_path / "plugin.log").open("a") as log_file:
            for line in range(SIBLING_WRITES):
                log_file.write(f"line {line}\n")
                log_file.flush()
        (tmp_path / "notes.txt").write_text("unrelated\n")
        change(config)
        assert calls.seen.wait(WAIT_S), "the config's change went unnoticed"
    finally:
        watch.stop()
    # The events arrive in order, so the log's writes were all handled before the config's change was:
    # only the change's own few events (created, modified, closed, moved) may have called back.
    assert calls.count <= 4, f"{calls.count} reloads for one change: writes beside the config were reported"


RELEVANT = [
    ("plain-file", plain_file, {"config.yaml", "..data"}),
    ("symlink-to-a-sibling", link_to_sibling, {"config.yaml", "..data", "real.yaml"}),
    ("configmap-mount", configmap_mount, {"config.yaml", "..data"}),
]


@pytest.mark.parametrize(("make", "names"), [(m, n) for _, m, n in RELEVANT], ids=[i for i, _, _ in RELEVANT])
def test_relevant_names_follow_the_config_paths_own_link(
    tmp_path: Path, make: Callable[[Path], Path], names: set[str]
) -> None:
    assert relevant_names(make(tmp_path)) == names
