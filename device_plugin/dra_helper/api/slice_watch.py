"""Notice when our ResourceSlices are changed or deleted behind our back, and ask for a reconcile.

Boundary: one thread and one HTTP watch on resourceslices (reads only); what to publish is the
publisher's job. The kubelet deletes every slice of its node when it starts, in the background and
at the moment it registers the running driver again; an admin or another controller may edit or
delete a slice. Without a watch such a change lasts until the devices change (possibly forever).

How: the watch starts from the resourceVersion of the publisher's latest LIST (SliceStore.list), so
nothing between that list and the watch is missed, and no second LIST is spent. Each event is
filtered like a LIST item (our driver, our node); events about our own writes and deletes are
skipped (one of ours stored without the taints we sent is logged as such: the publisher falls back
on the write's answer); any other calls `changed()` (the publisher's resync, which writes nothing
when the pool is as it should be). A watch that ends normally (after WATCH_S, server side) is
resumed from the last event (after a backoff when it lasted under MIN_WATCH_S: a proxy closing
streams must not make a request loop); one that fails (410 Gone, a broken stream, a server down)
asks for a resync, which lists again, and resumes from that list, after a backoff. Each watch is one
stream through transport.py, read on the serving loop while this thread waits for it; stop() cancels
it there, so the thread ends at once.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from device_plugin.core.backoff import Backoff
from device_plugin.core.short_text import one_line
from device_plugin.dra_helper.api.api_errors import ApiError
from device_plugin.dra_helper.api.slice_store import SliceStore, path
from device_plugin.serving import event_loop

log = logging.getLogger(__name__)

WATCH_S = 300  # the server ends each watch after this; we resume it
READ_SLACK_S = 30.0  # a stream silent this much longer than WATCH_S is a hung connection
MAX_EVENT_BYTES = 16 * 1024 * 1024  # one event line (a slice is at most ~1.5 MiB as JSON)
WAIT_LIST_S = 0.5  # how often a thread waiting for a LIST looks at stop()
REFUSALS = frozenset({401, 403, 405})  # the server will not let us watch (not: it failed)
MIN_WATCH_S = 1.0  # a watch that ends normally sooner than this is resumed after a backoff
RETRY = Backoff(initial_s=0.1, max_s=5.0)  # between failed watches (the publisher passes its own)


class WatchEnded(Exception):
    """The stream ended in a way that needs a new LIST (410 Gone, an error event, a line too
    long)."""


class SliceWatch:
    def __init__(
        self,
        store: SliceStore,
        api_version: Callable[[], str | None],
        changed: Callable[[], None],
        *,
        watch_s: int = WATCH_S,
        backoff: Backoff = RETRY,
        repairs: Callable[[], bool] = lambda: True,
    ) -> None:
        """`repairs()`: whether this instance repairs the pool now (not while another instance
        publishes it: then its writes are expected, and are neither logged nor acted on)."""
        self._repairs = repairs
        self._store = store
        self._api_version = api_version
        self._changed = changed
        self._watch_s = watch_s
        self._backoff = backoff
        self._stop = threading.Event()
        self._lock = threading.Lock()
        # the watch in progress, on the loop
        self._following: concurrent.futures.Future[str] | None = None
        self._thread: threading.Thread | None = None
        self.events_seen = 0  # someone else's changes noticed (a figure for tests and logs)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="dra-slice-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 1.0) -> None:
        self._stop.set()
        with self._lock:
            following = self._following
        if following is not None:
            following.cancel()
        with self._store.listed:
            self._store.listed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ---- the thread ----------------------------------------------------------------------------

    def _loop(self) -> None:
        since: str | None = None
        seen_lists = 0
        refused = False
        delays = self._backoff.delays_s()
        while not self._stop.is_set():
            version = self._api_version()
            if since is None or version is None:
                with self._store.listed:  # wait for a LIST newer than the last one we started from
                    if self._store.list_count <= seen_lists or version is None:
                        self._store.listed.wait(WAIT_LIST_S)
                        continue
                    seen_lists, since = self._store.list_count, self._store.list_version
            started = time.monotonic()
            try:
                since = self._watch(version, since)
                # ended at once (a proxy closing streams): no spin
                if time.monotonic() - started < MIN_WATCH_S:
                    self._stop.wait(next(delays))
                else:
                    delays.reset()
                    refused = False
            except Exception as error:
                if self._stop.is_set():
                    return
                if isinstance(error, ApiError) and error.status in REFUSALS:
                    # once per run of refusals: the same words every few seconds help nobody
                    if not refused:
                        log.warning(
                            "the API server refuses our watch on ResourceSlices (%s): grant the "
                            "verb `watch` on "
                            "resourceslices (deploy/dra/driver/rbac.yaml); until then a pool "
                            "deleted by others is "
                            "repaired only every few seconds, by listing",
                            _reason(error),
                        )
                    refused = True
                else:
                    log.info(
                        "the watch on our ResourceSlices ended (%s); listing them again",
                        _reason(error),
                    )
                since = None
                self._changed()  # the resync lists again (and repairs what we may have missed)
                self._stop.wait(next(delays))

    def _watch(self, version: str, since: str) -> str:
        """Follow one watch from `since`; returns the resourceVersion to resume from when it ends
        normally."""
        following = event_loop.submit(self._follow(version, since))
        with self._lock:
            self._following = following
        if self._stop.is_set():
            following.cancel()
        try:
            since = following.result()
        except concurrent.futures.CancelledError:
            raise WatchEnded("stopped") from None
        finally:
            with self._lock:
                self._following = None
        if self._stop.is_set():
            raise WatchEnded("stopped")
        return since

    async def _follow(self, version: str, since: str) -> str:
        query = {
            "fieldSelector": self._store.selector,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self._watch_s),
            **({"resourceVersion": since} if since else {}),
        }
        lines = EventLines()
        stream = self._store.transport.stream(
            path(version), query, read_timeout_s=self._watch_s + READ_SLACK_S
        )
        async with stream as body:
            async for chunk in body.iter_any():
                for event in lines.feed(chunk):
                    since = self._take(event) or since
        for event in lines.end():
            since = self._take(event) or since
        return since

    def _take(self, event: dict[str, Any]) -> str | None:
        kind, obj = event.get("type"), event.get("object")
        if not isinstance(obj, dict):
            raise WatchEnded(f"an event without an object: {one_line(str(event), 200)}")
        if kind == "ERROR":  # 410 Gone: our resourceVersion is too old; anything else: relist too
            raise WatchEnded(
                f"error event {obj.get('code')}: {one_line(str(obj.get('message')), 200)}"
            )
        metadata = obj.get("metadata")
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        if (
            kind in ("ADDED", "MODIFIED", "DELETED")
            and self._store.ours(obj)
            and not self._store.was_ours(kind, obj)
        ):
            name = one_line(str(metadata.get("name") if isinstance(metadata, dict) else ""), 300)
            if kind != "DELETED" and self._store.taints_dropped_from_ours(obj):
                log.info(
                    "ResourceSlice %s: the server dropped the taints (device taints off?)", name
                )
                # the publisher sees it too
                return version if isinstance(version, str) and version else None
            if not self._repairs():
                return version if isinstance(version, str) and version else None
            self.events_seen += 1
            log.info(
                "ResourceSlice %s was %s by someone else (e.g. the kubelet); reconciling our pool",
                name,
                {"ADDED": "added", "MODIFIED": "changed", "DELETED": "deleted"}[str(kind)],
            )
            self._changed()
        return version if isinstance(version, str) and version else None


class EventLines:
    """The JSON lines of a watch stream as its chunks arrive, each at most MAX_EVENT_BYTES."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        if len(self._pending) > MAX_EVENT_BYTES:
            raise WatchEnded(f"a watch event longer than {MAX_EVENT_BYTES} bytes")
        return [_decode(line) for line in lines if line.strip()]

    def end(self) -> list[dict[str, Any]]:
        pending, self._pending = self._pending, b""
        return [_decode(pending)] if pending.strip() else []


def _decode(line: bytes) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError as error:
        raise WatchEnded(f"a watch event that is not JSON: {error}") from None
    if not isinstance(event, dict):
        raise WatchEnded("a watch event that is not an object")
    return event


def _reason(error: Exception) -> str:
    return one_line(f"{type(error).__name__}: {error}", 300)
