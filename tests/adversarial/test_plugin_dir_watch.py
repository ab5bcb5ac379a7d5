"""The directory watch: it survives its directory being deleted and re-created, and a clean stop logs
no ERROR even while the directory is busy (issue 11: the watch died with its directory; a clean
shutdown sometimes logged an ERROR from watchdog's emitter)."""

from __future__ import annotations

import logging
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.dp_helper.plugin_dir_watch import DirectoryEvents, KubeletWatcher

WAIT_S = 10.0
WATCH_LOGGERS = ("device_plugin.dp_helper.plugin_dir_watch", "watchdog")  # what a stop of the watcher can log through


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gdp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Recorder:
    def __init__(self) -> None:
        self.events: list[DirectoryEvents] = []
        self._cond = threading.Condition()

    def __call__(self, events: DirectoryEvents) -> None:
        with self._cond:
            self.events.append(events)
            self._cond.notify_all()

    def wait_kubelet_created(self) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: any(e.kubelet_socket_created for e in self.events), WAIT_S)


def _make_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))


def test_a_kubelet_restart_after_the_directory_was_recreated_is_seen(plugin_dir: Path) -> None:
    recorder = Recorder()
    watcher = KubeletWatcher(plugin_dir, "nvidia-gpu.sock", recorder, debounce_s=0.05, recheck_s=0.1)
    watcher.start()
    try:
        shutil.rmtree(plugin_dir)
        plugin_dir.mkdir()
        shutil.rmtree(plugin_dir)  # twice: the second directory is the one that must be watched
        plugin_dir.mkdir()
        time.sleep(0.5)  # well past a recheck, so the new directory is watched before the kubelet starts
        _make_socket(plugin_dir / "kubelet.sock")
        assert recorder.wait_kubelet_created(), "kubelet.sock in the re-created directory went unnoticed"
    finally:
        watcher.stop()


def test_a_clean_stop_on_a_busy_directory_logs_no_error(plugin_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    stop_churn = threading.Event()

    def churn() -> None:  # a kubelet and pods keep writing while we stop
        n = 0
        while not stop_churn.is_set():
            path = plugin_dir / f"f{n % 50}"
            path.write_text("x")
            path.unlink()
            n += 1

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        with caplog.at_level(logging.INFO):
            for _ in range(40):
                watcher = KubeletWatcher(plugin_dir, "nvidia-gpu.sock", lambda _events: None)
                watcher.start()
                watcher.stop()
    finally:
        stop_churn.set()
        thread.join()
    # the watcher's own and watchdog's lines only: threads of servers that earlier tests stopped may log too
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith(WATCH_LOGGERS)]
    assert errors == [], [f"{r.name}: {r.getMessage()}" for r in errors]
