"""Publish this node's pool as ResourceSlices and keep it current: reconcile, retry, clean up.

Boundary: owns one background thread and our slices in the API server (through `transport`); knows
nothing of NVML or health: callers hand it the node's devices (`request`) whenever they change. A
reconcile lists our slices (slice_store.py) and, when they differ from what the devices give, writes
the new generation into every slice and deletes stale ones; when nothing differs it writes nothing.
A watch (slice_watch.py) asks for a reconcile when someone else changes one of our slices (the
kubelet's start-up wipe is repaired at once). Transient failures (server down, 5xx, 429) and writes
the server answered but did not store (each answer must carry the spec sent; the pool is listed
again after writing) are retried with backoff, always with the newest devices; `generation` is the
one the server was seen to hold, `error` (shown by /readyz) what is not confirmed yet. Only the
instance pool_owner.py names writes or repairs the pool (a rolling update runs two). Whether the
server keeps device taints is found out by taint_support.py before a sick device is stored. stop()
ends the watch and deletes our slices, and says what it did (nothing when the API server was never
reached).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from device_plugin.core.backoff import Backoff
from device_plugin.core.short_text import one_line
from device_plugin.dra_helper.api.api_errors import is_transient
from device_plugin.dra_helper.api.devices import SliceDevice
from device_plugin.dra_helper.api.kube import (
    NodeFacts,
    UnsupportedApiError,
    newest_resource_version,
    read_node,
)
from device_plugin.dra_helper.api.pool_compare import (
    generation_of,
    held_summary,
    same_pool,
    taint_count,
)
from device_plugin.dra_helper.api.pool_owner import OWNER_POLL_S, PoolOwner
from device_plugin.dra_helper.api.slice_store import SliceStore, UnconfirmedWrite
from device_plugin.dra_helper.api.slice_watch import WATCH_S, SliceWatch
from device_plugin.dra_helper.api.slices import GROUP, build_slices
from device_plugin.dra_helper.api.taint_support import TaintSupport, write_checked
from device_plugin.dra_helper.api.transport import ApiTransport

log = logging.getLogger(__name__)
# `error` is shown by /readyz and logged: an API server's answer can be megabytes
MAX_ERROR_CHARS = 1024


class SlicePublisher:
    def __init__(
        self,
        transport: ApiTransport,
        *,
        driver_name: str,
        node_name: str,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 5.0,
        watch_s: int = WATCH_S,
        owner: Callable[[], bool] = lambda: True,
        catch_up: Callable[[], None] = lambda: None,
        on_node: Callable[[NodeFacts], None] = lambda facts: None,
    ) -> None:
        """`owner()`: whether this instance publishes the pool now (always, with one instance);
        `catch_up()`: called while it does, every OWNER_POLL_S and before its first reconcile as
        owner."""
        self._transport = transport
        self._ownership = PoolOwner(node_name, owner, catch_up)
        # told once, when the Node was read (its UID, its container runtime)
        self._on_node = on_node
        self._store = SliceStore(transport, driver_name=driver_name, node_name=node_name)
        self._driver = driver_name
        self._node = node_name
        self._backoff = Backoff(initial_s=backoff_initial_s, max_s=backoff_max_s)
        self.api_version: str | None = None
        self._node_uid: str | None = None
        self.generation = 0  # the pool generation the server was last seen to hold (written by us)
        # whether the server keeps device taints (found out from its answers)
        self.taints = TaintSupport()
        self.error: str = ""  # the last failure, "" after a success
        self._cond = threading.Condition()
        self._devices: tuple[SliceDevice, ...] | None = None
        self._requested = 0  # sequence of request() calls
        self._synced = 0  # the request sequence the API server holds now
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.watch = SliceWatch(
            self._store,
            lambda: self.api_version,
            self.resync,
            watch_s=watch_s,
            backoff=self._backoff,
            repairs=lambda: self._ownership.owns,
        )

    # ---- public --------------------------------------------------------------------------------

    @property
    def owns_pool(self) -> bool:
        """Whether this instance writes the pool now (always, with one instance): pool_owner.py."""
        return self._ownership.owns

    @property
    def taints_kept(self) -> bool:
        """Whether taints are written (until the server showed it keeps none: then sick devices
        leave the pool)."""
        return self.taints.usable

    def request(self, devices: Sequence[SliceDevice]) -> None:
        """Publish these devices (in listing order) soon; a newer request replaces a pending one."""
        with self._cond:
            self._devices = tuple(devices)
            self._requested += 1
            self._cond.notify_all()

    def resync(self) -> None:
        """Reconcile again with the same devices (the kubelet (re)registered us, or the watch saw a
        change)."""
        with self._cond:
            if self._devices is not None:
                self._requested += 1
                self._cond.notify_all()

    def wait_synced(self, timeout_s: float) -> bool:
        """True once the API server holds the newest requested devices."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._synced < self._requested:
                if (
                    not self._cond.wait(max(0.0, deadline - time.monotonic()))
                    and time.monotonic() >= deadline
                ):
                    return False
            return True

    def published_once(self) -> bool:
        """The API server has held one of our requested device lists (a newer may be on its way)."""
        with self._cond:
            return self._synced > 0

    def running(self) -> bool:
        """Both threads (reconcile and watch) are alive: a dead one would leave the pool
        unrepaired."""
        return self._thread is not None and self._thread.is_alive() and self.watch.running()

    def start(self) -> None:
        """Start the threads (once: a second call does nothing)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="dra-publisher", daemon=True)
        self._thread.start()
        self.watch.start()

    def stop(self, timeout_s: float = 3.0, *, unpublish: bool = True) -> bool:
        """Stop the threads; then delete our slices (clean shutdown: nothing stale stays). True when
        done."""
        deadline = time.monotonic() + timeout_s
        self._stop.set()
        # first: our own deletes are no news to act on
        self.watch.stop(timeout_s=min(1.0, timeout_s / 3))
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=max(0.1, deadline - time.monotonic()))
        if not unpublish:
            return True
        if self.api_version is None:  # never reached the server: nothing of ours can be there
            log.warning(
                "the API server was never reached: no ResourceSlices to delete (none were "
                "published)"
            )
            return True
        return self._unpublish(self.api_version, deadline)

    def _unpublish(self, version: str, deadline: float) -> bool:
        """Delete our slices, all at once (one round trip, not one per slice: a slow API server must
        not eat the graceful budget). The names are those we wrote when the pool is in sync, else a
        LIST's."""
        try:
            with self._cond:
                in_sync = self._synced >= self._requested and not self.error
            names = list(self._store.written()) if in_sync else []
            names = names or sorted(o["metadata"]["name"] for o in self._store.list(version))
        except Exception as error:  # the kubelet also deletes them when our socket goes away
            log.warning("could not list our ResourceSlices at shutdown: %s", _describe(error))
            return False
        left = self._store.delete_all(version, names, deadline)
        if left:
            log.warning(
                "could not delete our ResourceSlices at shutdown: %s",
                "; ".join(left)[:MAX_ERROR_CHARS],
            )
            return False
        log.info("deleted the ResourceSlices of pool %s (%d)", self._node, len(names))
        return True

    # ---- the loop ------------------------------------------------------------------------------

    def _await_work(self) -> None:
        """Until there is something to write and this instance owns the pool (or a stop). Under
        `_cond`."""
        while not self._stop.is_set():
            owner = self._ask_owner()
            if owner and self._synced < self._requested:
                return
            self._cond.wait(OWNER_POLL_S)

    def _ask_owner(self) -> bool:
        """Whether we publish the pool (pool_owner.py); on becoming its writer, reconcile once.
        Under `_cond`, released while asking: catching up reads the checkpoint and may request new
        devices."""
        self._cond.release()
        try:
            owner, became = self._ownership.ask()
        finally:
            self._cond.acquire()
        if became and self._devices is not None:
            self._requested += 1
        return owner

    def _loop(self) -> None:
        delays = self._backoff.delays_s()
        while not self._stop.is_set():
            with self._cond:
                self._await_work()
                target, devices = self._requested, self._devices
            if self._stop.is_set() or devices is None:
                return
            try:
                self.reconcile(devices)
            except UnsupportedApiError as error:
                self.error = _describe(error)
                log.error("cannot publish ResourceSlices: %s", self.error)
                return
            except Exception as error:
                self.error = _describe(error)
                delay_s = next(delays)
                if isinstance(error, UnconfirmedWrite):
                    log.warning("%s; writing it again in %.1f s", self.error, delay_s)
                elif not is_transient(error):
                    log.error("publishing ResourceSlices failed (will retry): %s", self.error)
                else:
                    log.warning(
                        "API server unavailable (%s); retrying in %.1f s", self.error, delay_s
                    )
                self._stop.wait(delay_s)
                continue
            delays.reset()
            self.error = ""
            with self._cond:
                self._synced = max(self._synced, target)
                self._cond.notify_all()

    def reconcile(self, devices: Sequence[SliceDevice]) -> int:
        """One attempt: make the API server hold exactly these devices in our pool. Returns the
        generation."""
        version = self.api_version
        if version is None:
            version = self.api_version = newest_resource_version(self._transport)
            log.info("publishing ResourceSlices as %s/%s", GROUP, version)
        if self._node_uid is None:
            facts = read_node(self._transport, self._node)
            self._node_uid = facts.uid
            try:
                self._on_node(facts)
            except Exception:  # what the caller does with it must not stop the publishing
                log.exception("handling what node %s reports failed", self._node)
        existing = {o["metadata"]["name"]: o for o in self._store.list(version)}

        def build(generation: int) -> list[dict[str, Any]]:
            return build_slices(
                devices,
                node_name=self._node,
                driver_name=self._driver,
                generation=generation,
                api_version=version,
                node_uid=self._node_uid,
                taints_kept=self.taints_kept,
            )

        current = {generation_of(o) for o in existing.values()}
        if len(current) == 1 and same_pool(existing, build(next(iter(current)))):
            self.generation = next(iter(current))
            # an earlier run's slices, as we would write them: ours now
            self._store.adopt(existing.values())
            return self.generation
        generation = max([self.generation, *current]) + 1
        desired = build(generation)
        probe = (
            next((o for o in desired if taint_count(o["spec"])), None)
            if self.taints.kept is None
            else None
        )
        # Whether the server keeps taints is found out before a sick device is published: a dry run
        # stores nothing.
        if probe is not None and not self._write(
            version, probe, existing, generation, dry_run=True
        ):
            # at once, without the tainted devices (once: taints are off now)
            return self.reconcile(devices)
        for obj in desired:
            if not self._write(version, obj, existing, generation):
                # the server changed its mind since the dry run (a restart)
                return self.reconcile(devices)
        for name in sorted(set(existing) - {o["metadata"]["name"] for o in desired}):
            self._store.delete(version, name)
        # Read back: a 200 whose answer looked right may still not be what is stored (a proxy, a
        # cache).
        held = {o["metadata"]["name"]: o for o in self._store.list(version)}
        if not same_pool(held, desired):
            summary = held_summary(held, desired)
            raise UnconfirmedWrite(
                f"pool generation {generation} not confirmed: the API server holds {summary}"
            )
        self.generation = generation
        # without those left out (taints not kept)
        written = sum(len(o["spec"]["devices"]) for o in desired)
        log.info(
            "pool %s: generation %d, %d devices in %d slices",
            self._node,
            generation,
            written,
            len(desired),
        )
        return generation

    def _write(
        self,
        version: str,
        obj: dict[str, Any],
        existing: dict[str, Any],
        generation: int,
        *,
        dry_run: bool = False,
    ) -> bool:
        """One slice written (or dry-run) and checked: taint_support.write_checked."""
        try:
            return write_checked(self._store, self.taints, version, obj, existing, dry_run=dry_run)
        except UnconfirmedWrite as error:
            raise UnconfirmedWrite(f"pool generation {generation} not confirmed: {error}") from None


def _describe(error: BaseException) -> str:
    """An error for a log line and /readyz: one line, bounded (an API server's message can be
    long)."""
    return one_line(f"{type(error).__name__}: {error}", MAX_ERROR_CHARS)
