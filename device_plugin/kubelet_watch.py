"""Watch the device-plugin directory for what a kubelet restart looks like from the outside.

Two kinds of event matter: `kubelet.sock` appears (created or moved in: the kubelet (re)started) and
one of our own sockets disappears (the kubelet cleaned the directory). A kubelet restart produces a
burst of both, so events are debounced: the callback fires once, `debounce_s` after the last one,
with everything seen in the burst. The watcher reads the directory; it never changes anything in it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DirectoryEvents:
    """What one debounced burst contained."""

    kubelet_socket_created: bool
    removed_sockets: frozenset[str]  # names of our own sockets that were deleted or moved away


class KubeletWatcher:
    def __init__(
        self,
        plugin_dir: Path,
        own_socket_names: Callable[[], Collection[str]],
        on_events: Callable[[DirectoryEvents], None],
        *,
        kubelet_socket_name: str = "kubelet.sock",
        debounce_s: float = 0.15,
    ) -> None:
        self._dir = plugin_dir
        self._own_socket_names = own_socket_names
        self._on_events = on_events
        self._kubelet_socket_name = kubelet_socket_name
        self._debounce_s = debounce_s
        self._lock = threading.Lock()
        self._kubelet_created = False
        self._removed: set[str] = set()
        self._timer: threading.Timer | None = None
        self._observer: Observer | None = None  # type: ignore[valid-type]
        self._stopped = False

    def start(self) -> None:
        handler = _Handler(self._note)
        observer = Observer()
        observer.schedule(handler, str(self._dir), recursive=False)
        observer.daemon = True
        observer.start()
        self._observer = observer
        log.info("watching %s for %s and our sockets", self._dir, self._kubelet_socket_name)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._timer is not None:
                self._timer.cancel()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2.0)

    def _note(self, kind: str, path: str) -> None:
        name = Path(path).name
        own = set(self._own_socket_names())
        with self._lock:
            if self._stopped:
                return
            if kind == "created" and name == self._kubelet_socket_name:
                self._kubelet_created = True
            elif kind == "removed" and name in own:
                self._removed.add(name)
            else:
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self._debounce_s, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._stopped:
                return
            events = DirectoryEvents(self._kubelet_created, frozenset(self._removed))
            self._kubelet_created = False
            self._removed.clear()
            self._timer = None
        log.info(
            "plugin dir changed: kubelet.sock %s, our sockets removed: %s",
            "created" if events.kubelet_socket_created else "unchanged",
            ",".join(sorted(events.removed_sockets)) or "none",
        )
        try:
            self._on_events(events)
        except Exception:  # the observer thread must survive a callback bug
            log.exception("handling plugin dir events failed")


class _Handler(FileSystemEventHandler):
    def __init__(self, note: Callable[[str, str], None]) -> None:
        self._note = note

    @staticmethod
    def _text(path: str | bytes) -> str:
        return path.decode() if isinstance(path, bytes) else path

    def on_created(self, event: FileSystemEvent) -> None:
        self._note("created", self._text(event.src_path))

    def on_deleted(self, event: FileSystemEvent) -> None:
        self._note("removed", self._text(event.src_path))

    def on_moved(self, event: FileSystemEvent) -> None:
        self._note("removed", self._text(event.src_path))
        self._note("created", self._text(event.dest_path))
