"""The labels file is never written inside the device-plugin directory, nor onto anything but a regular file.

Reproduces issue 11: a labelsFile inside the kubelet's directory overwrote kubelet_internal_checkpoint,
and a FIFO or /dev/zero at the labels path hung the writer or filled memory. Refused at load (exit 2
at start-up) and again at every write, comparing paths with symlinks followed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from device_plugin.config.loader import load_config
from device_plugin.core.errors import ConfigError
from device_plugin.observability.labels import FeaturesFileWriter

CHECKPOINT = "kubelet_internal_checkpoint"
LABELS = {"nvidia.com/gpu.count": "8"}
HANG_GUARD_S = 20.0  # a hang fails the test instead of stopping the suite


@dataclass
class Dirs:
    plugin: Path  # the kubelet's device-plugin directory, with its checkpoint
    other: Path  # somewhere we may write


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    plugin, other = tmp_path / "device-plugins", tmp_path / "features.d"
    plugin.mkdir()
    other.mkdir()
    (plugin / CHECKPOINT).write_text("the kubelet's")
    return Dirs(plugin, other)


def in_the_plugin_dir(d: Dirs) -> Path:
    return d.plugin / "gpu-labels"


def onto_the_checkpoint(d: Dirs) -> Path:
    return d.plugin / CHECKPOINT


def in_a_new_subdir_of_the_plugin_dir(d: Dirs) -> Path:
    return d.plugin / "sub" / "labels"


def through_a_symlinked_directory(d: Dirs) -> Path:
    (d.other / "link").symlink_to(d.plugin)
    return d.other / "link" / "labels"


def a_symlink_onto_the_checkpoint(d: Dirs) -> Path:
    (d.other / "labels").symlink_to(d.plugin / CHECKPOINT)
    return d.other / "labels"


def with_dot_dot(d: Dirs) -> Path:
    return d.other / ".." / d.plugin.name / "labels"


def a_fifo(d: Dirs) -> Path:
    os.mkfifo(d.other / "labels")
    return d.other / "labels"


def a_symlink_to_dev_zero(d: Dirs) -> Path:
    (d.other / "labels").symlink_to("/dev/zero")
    return d.other / "labels"


def a_directory(d: Dirs) -> Path:
    (d.other / "labels").mkdir()
    return d.other / "labels"


REFUSED: list[tuple[str, Callable[[Dirs], Path], str]] = [
    ("in-the-plugin-dir", in_the_plugin_dir, "lies in"),
    ("onto-the-checkpoint", onto_the_checkpoint, "lies in"),
    ("in-a-new-subdir-of-the-plugin-dir", in_a_new_subdir_of_the_plugin_dir, "lies in"),
    ("through-a-symlinked-directory", through_a_symlinked_directory, "lies in"),
    ("a-symlink-onto-the-checkpoint", a_symlink_onto_the_checkpoint, "lies in"),
    ("dot-dot-into-the-plugin-dir", with_dot_dot, "lies in"),
    ("a-fifo", a_fifo, "not a regular file"),
    ("a-symlink-to-dev-zero", a_symlink_to_dev_zero, "not a regular file"),
    ("a-directory", a_directory, "not a regular file"),
]


def run_guarded(call: Callable[[], Any]) -> dict[str, Any]:
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the test thread
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    assert not thread.is_alive(), "hung"
    return outcome


@pytest.mark.parametrize(("make", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_load_refuses_the_target(dirs: Dirs, make: Callable[[Dirs], Path], words: str) -> None:
    target = make(dirs)
    env = {"LABELS_FILE": str(target), "DEVICE_PLUGIN_DIR": str(dirs.plugin)}
    outcome = run_guarded(lambda: load_config(env=env))
    error = outcome.get("error")
    assert isinstance(error, ConfigError), outcome
    assert error.field == "gpuDevicePlugin.labelsFile" and words in error.message, str(error)
    assert (dirs.plugin / CHECKPOINT).read_text() == "the kubelet's"


@pytest.mark.parametrize(("make", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_the_writer_refuses_the_target_at_write_time(dirs: Dirs, make: Callable[[Dirs], Path], words: str) -> None:
    writer = FeaturesFileWriter(make(dirs), refuse_under=(dirs.plugin,))
    outcome = run_guarded(lambda: writer.write(LABELS))
    assert isinstance(outcome.get("error"), ConfigError) and words in outcome["error"].message, outcome
    assert sorted(p.name for p in dirs.plugin.iterdir()) == [CHECKPOINT]
    assert (dirs.plugin / CHECKPOINT).read_text() == "the kubelet's"


def test_a_symlink_to_a_regular_file_is_replaced_not_written_through(dirs: Dirs) -> None:
    theirs = dirs.other / "someone-elses"
    theirs.write_text("not ours")
    (dirs.other / "labels").symlink_to(theirs)
    assert FeaturesFileWriter(dirs.other / "labels", refuse_under=(dirs.plugin,)).write(LABELS)
    assert theirs.read_text() == "not ours"
    assert not (dirs.other / "labels").is_symlink()
    assert (dirs.other / "labels").read_text() == "nvidia.com/gpu.count=8\n"


def test_a_plain_target_outside_is_written_once(dirs: Dirs) -> None:
    writer = FeaturesFileWriter(dirs.other / "labels", refuse_under=(dirs.plugin,))
    assert (writer.write(LABELS), writer.write(LABELS)) == (True, False)
    assert (dirs.other / "labels").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in dirs.other.iterdir()] == ["labels"]  # no temp file left behind
