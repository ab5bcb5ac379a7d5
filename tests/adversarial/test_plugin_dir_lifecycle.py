"""The plugin directory as a new operator or a hostile node gets it: umask 0, a relative path, a
directory that is missing, not a directory, or deleted and re-created under a running plugin.

Each test reproduces an issue-11 failure: the socket's mode came from the umask; a relative
--device-plugin-dir never bound; an unusable directory was never retried; a re-created directory
left the watch dead, so a later kubelet restart went unnoticed.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from device_plugin.config.model import Config
from device_plugin.core.names import GPU_RESOURCE
from device_plugin.nvml.backends import open_backend
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from testbed.observed import ObservedPluginManager
from testbed.timing import FAST_LIFECYCLE
from tests.composed import build_resources

WAIT_S = 10.0


@pytest.fixture
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gdp-", dir="/tmp"))  # short: unix socket paths max 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _manager(plugin_dir: Path) -> ObservedPluginManager:
    (resource,) = build_resources(open_backend("single-gpu"), Config())
    return ObservedPluginManager(resource, plugin_dir, timing=FAST_LIFECYCLE)


def _wait_until(condition: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077], ids=["umask-0", "umask-022", "umask-077"])
def test_the_socket_is_0600_whatever_the_umask(base: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        manager = _manager(base)
        manager.start()
    finally:
        os.umask(previous)
    kubelet = KubeletStandIn(base)
    kubelet.start()
    try:
        kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
        mode = (base / "nvidia-gpu.sock").lstat().st_mode
        assert stat.S_ISSOCK(mode)
        assert stat.S_IMODE(mode) == 0o600
        assert sorted(p.name for p in base.iterdir()) == ["kubelet.sock", "nvidia-gpu.sock"]  # no leftovers
    finally:
        manager.stop()
        kubelet.stop()


def test_a_relative_plugin_dir_is_taken_from_the_start_up_directory(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (base / "dp").mkdir()
    monkeypatch.chdir(base)
    manager = _manager(Path("dp"))
    monkeypatch.chdir("/")  # a later working directory must not matter
    kubelet = KubeletStandIn(base / "dp")
    kubelet.start()
    manager.start()
    try:
        kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
        assert (base / "dp" / "nvidia-gpu.sock").is_socket()
    finally:
        manager.stop()
        kubelet.stop()


def test_an_unusable_directory_is_retried_with_the_reason_logged(base: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = base / "kubelet"
    blocker.write_text("not a directory")  # so the plugin directory below it cannot exist
    plugin_dir = blocker / "device-plugins"
    manager = _manager(plugin_dir)
    kubelet = KubeletStandIn(plugin_dir)
    with caplog.at_level(logging.WARNING, logger="device_plugin"):
        manager.start()
        try:
            _wait_until(lambda: "Not a directory" in caplog.text)
            assert str(plugin_dir) in caplog.text
            assert "Not a directory (ENOTDIR)" in caplog.text
            assert manager.serving()[0] is False
            blocker.unlink()
            plugin_dir.mkdir(parents=True)  # the kubelet creates its directory
            kubelet.start()
            kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
            assert manager.wait_for_registrations(1, WAIT_S)
        finally:
            manager.stop()
            kubelet.stop()


def test_a_deleted_and_recreated_directory_is_served_and_watched_again(base: Path) -> None:
    plugin_dir = base / "device-plugins"
    plugin_dir.mkdir()
    manager = _manager(plugin_dir)
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    manager.start()
    try:
        kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
        kubelet.stop()
        shutil.rmtree(plugin_dir)
        plugin_dir.mkdir()  # e.g. a node agent wiped /var/lib/kubelet/device-plugins
        kubelet.start()
        kubelet.wait_for_connection(GPU_RESOURCE, count=2, timeout_s=WAIT_S)
        assert manager.wait_for_registrations(2, WAIT_S)
        # A later kubelet restart in the new directory is noticed too.
        kubelet.restart()
        connection = kubelet.wait_for_connection(GPU_RESOURCE, count=3, timeout_s=WAIT_S)
        assert manager.wait_for_registrations(3, WAIT_S)
        assert len(connection.lists[-1]) == 1
        assert stat.S_IMODE((plugin_dir / "nvidia-gpu.sock").lstat().st_mode) == 0o600
    finally:
        manager.stop()
        kubelet.stop()


def a_directory(path: Path) -> Callable[[], None]:
    path.mkdir()
    return path.rmdir


def a_dangling_symlink(path: Path) -> Callable[[], None]:
    path.symlink_to(path.parent / "nowhere")
    return path.unlink


def a_regular_file(path: Path) -> Callable[[], None]:
    path.write_text("not a socket\n")
    return path.unlink


BLOCKERS = [("directory", a_directory), ("dangling-symlink", a_dangling_symlink), ("regular-file", a_regular_file)]


@pytest.mark.parametrize("block", [b for _, b in BLOCKERS], ids=[i for i, _ in BLOCKERS])
def test_a_socket_path_that_was_blocked_is_served_once_it_is_free(
    base: Path, block: Callable[[Path], Callable[[], None]]
) -> None:
    """Issue 30 item 5: a file at our socket's path was left untouched, but once it was removed nothing was
    ever served again (only a kubelet restart brought the plugin back)."""
    plugin_dir = base / "device-plugins"
    plugin_dir.mkdir()
    unblock = block(plugin_dir / "nvidia-gpu.sock")
    manager = _manager(plugin_dir)
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    manager.start()
    try:
        _wait_until(lambda: "not-serving" in manager.serving()[1])
        unblock()
        connection = kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
        assert manager.wait_for_registrations(1, WAIT_S)
        assert len(connection.lists[-1]) == 1
        assert stat.S_ISSOCK((plugin_dir / "nvidia-gpu.sock").lstat().st_mode)
        _wait_until(lambda: manager.serving()[0])
    finally:
        manager.stop()
        kubelet.stop()


def test_the_first_kubelet_is_registered_with_without_a_restart_of_the_server(
    base: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 32 item 8: the plugin started before the kubelet took its first kubelet.sock for a kubelet restart,
    logged it so and served a fresh socket before registering (4 of 6 servers restarted under migStrategy mixed)."""
    plugin_dir = base / "device-plugins"
    plugin_dir.mkdir()
    manager = _manager(plugin_dir)
    kubelet = KubeletStandIn(plugin_dir)
    with caplog.at_level(logging.INFO, logger="device_plugin.dp_helper"):
        manager.start()
        try:
            _wait_until(lambda: "serving-unregistered" in caplog.text)
            socket_inode = (plugin_dir / "nvidia-gpu.sock").lstat().st_ino
            kubelet.start()
            kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
            assert manager.wait_for_registrations(1, WAIT_S)
            assert (plugin_dir / "nvidia-gpu.sock").lstat().st_ino == socket_inode  # the same socket, not re-served
        finally:
            manager.stop()
            kubelet.stop()
    assert "kubelet restart" not in caplog.text
    assert "-> restarting" not in caplog.text.split("serving-unregistered", 1)[1]


def test_a_stop_without_having_served_says_so(base: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 32 item 8: a copy that never served (another process held its path) logged "removed our socket"."""
    plugin_dir = base / "device-plugins"
    plugin_dir.mkdir()
    (plugin_dir / "nvidia-gpu.sock").mkdir()  # never served: the path is held
    manager = _manager(plugin_dir)
    with caplog.at_level(logging.INFO, logger="device_plugin.dp_helper"):
        manager.start()
        _wait_until(lambda: "not-serving" in manager.serving()[1])
        manager.stop()
    assert "no socket of ours to remove" in caplog.text and "removed our socket" not in caplog.text
