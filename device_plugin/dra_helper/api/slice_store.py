"""Our ResourceSlices in the API server: list, write, delete, and only ever ours.

Boundary: the HTTP calls on resourceslices for one driver on one node (through transport.py, from
the
publisher's thread); what to write is the publisher's job. Rules kept here:
- every LIST asks the server for `spec.nodeName=<node>,spec.driver=<driver>` and then filters the
  items again itself: a server or proxy that ignores the field selector (or a selector bug) must
  never make us update or delete another node's slices, or another driver's;
- an update carries the resourceVersion it read; a 409 Conflict (or a 404: deleted meanwhile)
  re-reads and tries again, a few times; a success whose answer is no object, or carries the
  resourceVersion the update replaced, was not stored (UnconfirmedWrite), whatever its status said;
- what we write (name -> spec and owner, remembered before the request goes out: the watch event can
  arrive before the answer) and what we delete is remembered, so the watch
  (dra_helper/api/slice_watch.py) can tell our own changes from someone else's; the resourceVersions
  our writes produced are kept too (a few per slice), because the event of an earlier write of ours
  can arrive after we wrote the slice again, when its content no longer matches what we remember.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from device_plugin.core.short_text import one_line
from device_plugin.dra_helper.api.api_errors import ApiError
from device_plugin.dra_helper.api.pool_compare import taint_count, without_taints
from device_plugin.dra_helper.api.slices import GROUP
from device_plugin.dra_helper.api.transport import ApiTransport

PLURAL = "resourceslices"
CONFLICT_RETRIES = 5
# resourceVersions of our own writes remembered per slice (events arrive late under load)
VERSIONS_KEPT = 8


class UnconfirmedWrite(Exception):
    """A write answered as a success that its answer, or a read after it, shows the server did not
    store."""


def is_ours(obj: object, *, driver_name: str, node_name: str) -> bool:
    """A ResourceSlice of this driver on this node (anything else, whatever the server sent, is
    not)."""
    if not isinstance(obj, Mapping):
        return False
    spec, metadata = obj.get("spec"), obj.get("metadata")
    if (
        not isinstance(spec, Mapping)
        or not isinstance(metadata, Mapping)
        or not isinstance(metadata.get("name"), str)
    ):
        return False
    return spec.get("driver") == driver_name and spec.get("nodeName") == node_name


class SliceStore:
    def __init__(self, transport: ApiTransport, *, driver_name: str, node_name: str) -> None:
        self.transport = transport
        self.driver = driver_name
        self.node = node_name
        self.selector = f"spec.nodeName={node_name},spec.driver={driver_name}"
        self._lock = threading.Lock()
        # name -> what our last write of it said (spec and owner)
        self._written: dict[str, object] = {}
        # names we deleted whose DELETED event has not been seen yet
        self._deleted: set[str] = set()
        # name -> resourceVersions our writes of it produced
        self._versions: dict[str, deque[str]] = {}
        # name -> our last writes of it with taints, without them
        self._recent: dict[str, deque[object]] = {}
        self.listed = threading.Condition()
        self.list_count = 0  # LISTs answered so far
        # the collection resourceVersion of the latest LIST ("" if the server sent none)
        self.list_version = ""

    def ours(self, obj: object) -> bool:
        return is_ours(obj, driver_name=self.driver, node_name=self.node)

    def list(self, version: str) -> list[dict[str, Any]]:
        """Our slices: asked for with field selectors, then filtered here (never trust the
        selector)."""
        body = self.transport.call(
            "GET", path(version), query={"fieldSelector": self.selector}
        ).json("listing our ResourceSlices")
        items = body.get("items") if isinstance(body, dict) else None
        metadata = body.get("metadata") if isinstance(body, dict) else None
        list_version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        with self.listed:
            self.list_count += 1
            self.list_version = list_version if isinstance(list_version, str) else ""
            self.listed.notify_all()
        return [o for o in items or () if self.ours(o)]

    def write(
        self,
        version: str,
        obj: dict[str, Any],
        current: dict[str, Any] | None,
        *,
        dry_run: bool = False,
    ) -> object:
        """Create `obj`, or update it over `current` (the object as read); conflicts are re-read and
        retried. Returns the server's answer: the object as stored (a server may drop fields it does
        not keep). `dry_run`: the server checks the write and answers what it would store, and
        stores nothing."""
        name = obj["metadata"]["name"]
        dry = {"dryRun": "All"} if dry_run else None
        if not dry_run:
            with self._lock:
                self._deleted.discard(name)
                self._written[name] = _content(obj)
                if taint_count(obj["spec"]):  # how it looks stored by a server that drops taints
                    self._recent.setdefault(name, deque(maxlen=VERSIONS_KEPT)).append(
                        _content(obj, taints=False)
                    )
        for _ in range(CONFLICT_RETRIES):
            try:
                replaced = (
                    _version_of(current).get("resourceVersion") if current is not None else None
                )
                if current is None:
                    sent = self.transport.call("POST", path(version), query=dry, body=obj)
                else:
                    body = {**obj, "metadata": {**obj["metadata"], **_version_of(current)}}
                    sent = self.transport.call("PUT", path(version, name), query=dry, body=body)
                answer = sent.json(f"writing ResourceSlice {name}")
                if dry_run:
                    return answer
                stored = (
                    _version_of(answer).get("resourceVersion")
                    if isinstance(answer, Mapping)
                    else None
                )
                if stored is None or stored == replaced:
                    what = (
                        "no object"
                        if stored is None
                        else f"resourceVersion {stored}, the one it replaced"
                    )
                    raise UnconfirmedWrite(
                        f"slice {name}: the API server answered the write with {what}: not stored"
                    )
                self._remember_version(name, answer)
                return answer
            except ApiError as error:
                if error.status not in (404, 409):
                    raise
                # 409: someone else wrote it (or it exists already); 404: it was deleted. Read and
                # retry.
                current = self.get(version, name)
                if current is not None and not self.ours(current):
                    raise RuntimeError(
                        f"ResourceSlice {name} exists but belongs to another driver or node"
                    ) from None
        raise RuntimeError(
            f"ResourceSlice {name}: still conflicting after {CONFLICT_RETRIES} attempts"
        )

    def _remember_version(self, name: str, answer: object) -> None:
        written_version = (
            _version_of(answer).get("resourceVersion") if isinstance(answer, Mapping) else None
        )
        if isinstance(written_version, str):
            with self._lock:
                self._versions.setdefault(name, deque(maxlen=VERSIONS_KEPT)).append(written_version)

    def get(self, version: str, name: str) -> dict[str, Any] | None:
        answer = self.transport.call("GET", path(version, name))
        if answer.status == 404:
            return None
        obj = answer.json(f"reading ResourceSlice {name}")
        return obj if isinstance(obj, dict) else None

    def delete(self, version: str, name: str) -> None:
        """Delete one of our slices (the caller took `name` from list(): it is ours); gone already
        is fine."""
        with self._lock:
            self._written.pop(name, None)
            self._deleted.add(name)
        answer = self.transport.call("DELETE", path(version, name))
        if answer.status != 404:  # already gone (the kubelet deletes them too): fine
            answer.check(f"deleting ResourceSlice {name}")

    def delete_all(self, version: str, names: Sequence[str], deadline: float) -> tuple[str, ...]:
        """Delete these slices of ours all at once (one round trip, not one per slice: a slow API
        server must not eat a stop's budget); what failed or had no answer by `deadline`
        (time.monotonic()), or []."""
        failures: list[str] = []

        def delete(name: str) -> None:
            try:
                self.delete(version, name)
            except Exception as error:
                failures.append(f"{name}: {one_line(f'{type(error).__name__}: {error}', 300)}")

        threads = [
            threading.Thread(target=delete, args=(n,), name="dra-unpublish", daemon=True)
            for n in names
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in threads):
            failures.append("no answer in time")
        return tuple(failures)

    def adopt(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Remember listed slices that hold what we would write (an earlier run's) as written by
        us."""
        with self._lock:
            for obj in objects:
                self._written[obj["metadata"]["name"]] = _content(obj)

    def written(self) -> tuple[str, ...]:
        """The names of the slices we wrote and have not deleted since (sorted)."""
        with self._lock:
            return tuple(sorted(self._written))

    def was_ours(self, kind: str, obj: Mapping[str, Any]) -> bool:
        """Whether a watch event reports a change we made ourselves (so nothing needs doing)."""
        name = obj["metadata"]["name"]  # the caller checked ours(obj): metadata.name is a string
        with self._lock:
            if kind == "DELETED":
                if name in self._deleted:
                    self._deleted.discard(name)
                    return True
                return False
            if _version_of(obj).get("resourceVersion") in self._versions.get(name, ()):
                return True  # an earlier write of ours, reported after we wrote the slice again
            return name in self._written and self._written[name] == _content(obj)

    def taints_dropped_from_ours(self, obj: Mapping[str, Any]) -> bool:
        """Whether `obj` (an ADDED or MODIFIED event) is one of our recent writes, as stored by a
        server that dropped its device taints: no one else's change, and the publisher sees the drop
        in the answer."""
        name = obj["metadata"]["name"]
        with self._lock:
            return taint_count(obj.get("spec") or {}) == 0 and _content(
                obj, taints=False
            ) in self._recent.get(name, ())


def path(version: str, name: str | None = None) -> str:
    """The resourceslices collection of `version`, or one slice in it."""
    collection = f"/apis/{GROUP}/{version}/{PLURAL}"
    return collection if name is None else f"{collection}/{quote(name, safe='')}"


def _version_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    rv = metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None
    return {"resourceVersion": rv} if rv else {}


def _content(obj: Mapping[str, Any], *, taints: bool = True) -> object:
    """What makes a slice ours as we wrote it: its spec and its owner (not its resourceVersion or
    status); with taints=False, the spec without the devices' taints."""
    metadata = obj.get("metadata")
    owners = metadata.get("ownerReferences") if isinstance(metadata, Mapping) else None
    spec = obj.get("spec")
    return (spec if taints or not isinstance(spec, Mapping) else without_taints(spec), owners)
