"""Watch the config file with watchdog and say when it may have changed.

Kubernetes updates a mounted ConfigMap by swapping a `..data` symlink in the file's directory, so the
watch covers the directory and reports any event there; the node runtime's ConfigFileReload
(config/file_reload.py) compares the content digest and ignores events that changed nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

log = logging.getLogger(__name__)


class _Handler(FileSystemEventHandler):
    def __init__(self, on_change: Callable[[], None]) -> None:
        self._on_change = on_change

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return  # reads (ours included) change nothing
        self._on_change()


class ConfigFileWatch:
    def __init__(self, path: Path, on_change: Callable[[], None]) -> None:
        self._path = path
        self._observer = Observer()
        self._observer.daemon = True
        # The directory as mounted, not resolved: a ConfigMap's file resolves into a `..<timestamp>` folder
        # that the kubelet deletes at the next update, which would end the watch.
        self._observer.schedule(_Handler(on_change), str(path.absolute().parent), recursive=False)

    def start(self) -> None:
        self._observer.start()
        log.info("watching %s for changes (valid changes are applied without a restart)", self._path)

    def stop(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=1.0)
