"""Watch the config file with watchdog and say when it may have changed.

Kubernetes updates a mounted ConfigMap by swapping a `..data` symlink in the file's directory, so
the watch covers the directory, but it reports only events that can change what the config path
reads: the file's own name, `..data`, and the first part of the file's own symlink target when it
points elsewhere in the folder. A log file or anything else written beside the config is not a
reason to reload (one such file made the daemon rescan thousands of times). The node runtime's
ConfigFileReload (config/file_reload.py) compares the content digest and ignores events that changed
nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path, PurePath

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

log = logging.getLogger(__name__)

CONFIGMAP_DATA_LINK = "..data"  # the symlink the kubelet swaps atomically at every ConfigMap update


def relevant_names(path: Path) -> set[str]:
    """The names in the config's folder whose change can change what `path` reads."""
    names = {path.name, CONFIGMAP_DATA_LINK}
    try:
        target = PurePath(os.readlink(path))
    except OSError:  # not a symlink, or gone for now: the file's own name covers its return
        return names
    if not target.is_absolute() and target.parts:
        names.add(target.parts[0])  # config.yaml -> ..data/config.yaml, or -> real.yaml beside it
    return names


class _Handler(FileSystemEventHandler):
    def __init__(self, path: Path, on_change: Callable[[], None]) -> None:
        self._path = path
        self._on_change = on_change

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return  # reads (ours included) change nothing
        touched = {_name(event.src_path), _name(getattr(event, "dest_path", "") or "")}
        if touched & relevant_names(self._path):
            self._on_change()


def _name(path: str | bytes) -> str:
    return os.path.basename(os.fsdecode(path)) if path else ""


class ConfigFileWatch:
    def __init__(self, path: Path, on_change: Callable[[], None]) -> None:
        self._path = path.absolute()
        self._observer = Observer()
        self._observer.daemon = True
        # The directory as mounted, not resolved: a ConfigMap's file resolves into a `..<timestamp>`
        # folder that the kubelet deletes at the next update, which would end the watch.
        self._observer.schedule(
            _Handler(self._path, on_change), str(self._path.parent), recursive=False
        )

    def start(self) -> None:
        self._observer.start()
        log.info(
            "watching %s for changes (valid changes are applied without a restart)", self._path
        )

    def stop(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=1.0)
