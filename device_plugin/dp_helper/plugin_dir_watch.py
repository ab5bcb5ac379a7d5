"""Watch the device-plugin directory for what a kubelet restart looks like from the outside.

Two kinds of event matter: `kubelet.sock` appears (created or moved in: the kubelet (re)started) and
our own socket disappears (the kubelet cleaned the directory). A kubelet restart produces a
burst of both, so events are debounced: the callback fires once, `debounce_s` after the last one,
with everything seen in the burst. The watcher reads the directory; it never changes anything in it.

An inotify watch dies with its directory. The watch reports the directory's own deletion; a
supervisor thread checks every `recheck_s` which directory is at the path, and when the watched one
was deleted (or replaced) and a directory is there again, the watch is set up anew and what
the new directory holds is reported as a burst (kubelet.sock present: created; our socket absent:
removed), so a kubelet restart after the re-creation is still noticed.

watchdog logs an ERROR ("queue_events() called when the thread is inactive") when an event arrives
while its observer stops, an unavoidable race on a directory the kubelet writes to; that one message
means nothing to us and is dropped by a filter on watchdog's logger, so a clean stop logs no ERROR.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

log = logging.getLogger(__name__)

_STOP_RACE_MESSAGE = "called when the thread is inactive"


def _not_the_stop_race(record: logging.LogRecord) -> bool:
    return _STOP_RACE_MESSAGE not in record.getMessage()


logging.getLogger("watchdog.observers.inotify").addFilter(_not_the_stop_race)


def _dir_identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


@dataclass(frozen=True)
class DirectoryEvents:
    """What one debounced burst contained."""

    kubelet_socket_created: bool
    own_socket_removed: bool  # deleted or moved away


class KubeletWatcher:
    def __init__(
        self,
        plugin_dir: Path,
        own_socket_name: str,
        on_events: Callable[[DirectoryEvents], None],
        *,
        kubelet_socket_name: str = "kubelet.sock",
        debounce_s: float = 0.15,
        recheck_s: float = 0.5,
    ) -> None:
        self._dir = plugin_dir
        self._own_socket_name = own_socket_name
        self._on_events = on_events
        self._kubelet_socket_name = kubelet_socket_name
        self._debounce_s = debounce_s
        self._lock = threading.Lock()
        self._kubelet_created = False
        self._removed = False
        self._timer: threading.Timer | None = None
        self._recheck_s = recheck_s
        self._observer: Observer | None = None  # type: ignore[valid-type]
        self._handler = _Handler(self._note)
        self._watched: tuple[int, int] | None = None  # which directory the inotify watch is on
        self._stopped = False
        self._stop_event = threading.Event()
        self._supervisor: threading.Thread | None = None

    def start(self) -> None:
        observer = Observer()
        observer.daemon = True
        observer.start()
        self._observer = observer
        self._rewatch(report=False)
        self._supervisor = threading.Thread(
            target=self._supervise, name="plugin-dir-watch", daemon=True
        )
        self._supervisor.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._timer is not None:
                self._timer.cancel()
        self._stop_event.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=2.0)
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2.0)

    def _supervise(self) -> None:
        while not self._stop_event.wait(self._recheck_s):
            if _dir_identity(self._dir) != self._watched:
                self._rewatch(report=True)

    def _rewatch(self, *, report: bool) -> None:
        """Watch whatever directory is at the path now (none while it is missing)."""
        assert self._observer is not None
        self._observer.unschedule_all()
        current = _dir_identity(self._dir)
        if current is not None:
            try:
                self._observer.schedule(self._handler, str(self._dir), recursive=False)
            # deleted again meanwhile, or no inotify watch left: next round
            except OSError as error:
                log.warning("cannot watch %s: %s; retrying", self._dir, error)
                current = None
        previous, self._watched = self._watched, current
        if current is None:
            if previous is not None or not report:
                log.warning("%s is missing; waiting for it to be created", self._dir)
            return
        log.info(
            "watching %s for %s and %s", self._dir, self._kubelet_socket_name, self._own_socket_name
        )
        if report:  # what happened while nobody watched
            if (self._dir / self._kubelet_socket_name).exists():
                self._note("created", self._kubelet_socket_name)
            if not (self._dir / self._own_socket_name).exists():
                self._note("removed", self._own_socket_name)

    def _note(self, kind: str, path: str) -> None:
        if kind == "removed" and Path(path) == self._dir:
            # The watched directory itself went (its inode may be reused at once by a re-creation,
            # so only this event tells): the supervisor watches whatever directory is there next.
            self._watched = None
            return
        name = Path(path).name
        with self._lock:
            if self._stopped:
                return
            if kind == "created" and name == self._kubelet_socket_name:
                self._kubelet_created = True
            elif kind == "removed" and name == self._own_socket_name:
                self._removed = True
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
            events = DirectoryEvents(self._kubelet_created, self._removed)
            self._kubelet_created = self._removed = False
            self._timer = None
        log.info(
            "plugin dir changed: kubelet.sock %s, %s %s",
            "created" if events.kubelet_socket_created else "unchanged",
            self._own_socket_name,
            "removed" if events.own_socket_removed else "unchanged",
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
