"""Publish this node's pool as ResourceSlices and keep it current: reconcile, retry, clean up.

Boundary: owns one background thread and our slices in the API server (through `kube`); knows
nothing of NVML or health: callers hand it the node's devices (`request`) whenever they change.
A reconcile lists our slices (driver and node field selectors), and when they differ from what the
devices give it writes the new generation into every slice (update with the resourceVersion it
read; on 409 Conflict it re-reads and updates again; a 409 AlreadyExists on create becomes an
update), then deletes stale slices of ours (fewer slices than before, or left by an earlier run).
When nothing differs it writes nothing, so a re-registration after a kubelet restart (which wipes
the node's slices) republishes exactly what is missing. Failures that may pass (server down, 5xx,
429) are retried with exponential backoff, always with the newest requested devices; a server
without a usable resource.k8s.io version is refused once, clearly. stop() deletes our slices.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from device_plugin.dra.inventory import DraDevice
from device_plugin.dra.kube import REQUEST_TIMEOUT_S, UnsupportedApiError, is_transient, newest_resource_version
from device_plugin.dra.kube import node_uid as read_node_uid
from device_plugin.dra.slices import GROUP, build_slices

log = logging.getLogger(__name__)
PLURAL = "resourceslices"
CONFLICT_RETRIES = 5


class SlicePublisher:
    def __init__(
        self,
        client: k8s.ApiClient,
        *,
        driver_name: str,
        node_name: str,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 5.0,
    ) -> None:
        self._client = client
        self._objects = k8s.CustomObjectsApi(client)
        self._driver = driver_name
        self._node = node_name
        self._backoff = (backoff_initial_s, backoff_max_s)
        self.api_version: str | None = None
        self._node_uid: str | None = None
        self.generation = 0  # the pool generation last written by us
        self.error: str = ""  # the last failure, "" after a success
        self._cond = threading.Condition()
        self._devices: tuple[DraDevice, ...] | None = None
        self._requested = 0  # sequence of request() calls
        self._synced = 0  # the request sequence the API server holds now
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- public --------------------------------------------------------------------------------

    def request(self, devices: Sequence[DraDevice]) -> None:
        """Publish these devices (in listing order) soon; a newer request replaces a pending one."""
        with self._cond:
            self._devices = tuple(devices)
            self._requested += 1
            self._cond.notify_all()

    def resync(self) -> None:
        """Reconcile again with the same devices (after the kubelet (re)registered us: it may have wiped them)."""
        with self._cond:
            if self._devices is not None:
                self._requested += 1
                self._cond.notify_all()

    def wait_synced(self, timeout_s: float) -> bool:
        """True once the API server holds the newest requested devices."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._synced < self._requested:
                if not self._cond.wait(max(0.0, deadline - time.monotonic())) and time.monotonic() >= deadline:
                    return False
            return True

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="dra-publisher", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 3.0, *, unpublish: bool = True) -> None:
        """Stop the thread; then delete our slices (clean shutdown: nothing stale stays)."""
        deadline = time.monotonic() + timeout_s
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=max(0.1, deadline - time.monotonic()))
        if unpublish:
            try:
                for name in self._our_slices():
                    self._delete(name)
                log.info("deleted the ResourceSlices of pool %s", self._node)
            except Exception as error:  # the kubelet also deletes them when our socket goes away
                log.warning("could not delete our ResourceSlices at shutdown: %s", error)

    # ---- the loop ------------------------------------------------------------------------------

    def _loop(self) -> None:
        delay_s = self._backoff[0]
        while not self._stop.is_set():
            with self._cond:
                while self._synced >= self._requested and not self._stop.is_set():
                    self._cond.wait()
                target, devices = self._requested, self._devices
            if self._stop.is_set() or devices is None:
                return
            try:
                self.reconcile(devices)
            except UnsupportedApiError as error:
                self.error = str(error)
                log.error("cannot publish ResourceSlices: %s", error)
                return
            except Exception as error:
                self.error = f"{type(error).__name__}: {error}"
                if not is_transient(error):
                    log.error("publishing ResourceSlices failed (will retry): %s", self.error)
                else:
                    log.warning("API server unavailable (%s); retrying in %.1f s", self.error, delay_s)
                self._stop.wait(delay_s)
                delay_s = min(delay_s * 2, self._backoff[1])
                continue
            delay_s = self._backoff[0]
            self.error = ""
            with self._cond:
                self._synced = max(self._synced, target)
                self._cond.notify_all()

    def reconcile(self, devices: Sequence[DraDevice]) -> int:
        """One attempt: make the API server hold exactly these devices in our pool. Returns the generation."""
        if self.api_version is None:
            self.api_version = newest_resource_version(self._client)
            log.info("publishing ResourceSlices as %s/%s", GROUP, self.api_version)
        if self._node_uid is None:
            self._node_uid = read_node_uid(self._client, self._node)
        existing = {o["metadata"]["name"]: o for o in self._list()}

        def build(generation: int) -> list[dict[str, Any]]:
            return build_slices(
                devices,
                node_name=self._node,
                driver_name=self._driver,
                generation=generation,
                api_version=self.api_version or "v1",
                node_uid=self._node_uid,
            )

        current = {o["spec"]["pool"]["generation"] for o in existing.values()}
        if len(current) == 1 and _same(existing, build(next(iter(current)))):
            self.generation = next(iter(current))
            return self.generation
        generation = max([self.generation, *current]) + 1
        desired = build(generation)
        for obj in desired:
            self._write(obj, existing.get(obj["metadata"]["name"]))
        for name in sorted(set(existing) - {o["metadata"]["name"] for o in desired}):
            self._delete(name)
        self.generation = generation
        log.info("pool %s: generation %d, %d devices in %d slices", self._node, generation, len(devices), len(desired))
        return generation

    # ---- API calls -----------------------------------------------------------------------------

    def _list(self) -> list[dict[str, Any]]:
        body = self._objects.list_cluster_custom_object(
            GROUP,
            self.api_version or "v1",
            PLURAL,
            field_selector=f"spec.nodeName={self._node},spec.driver={self._driver}",
            _request_timeout=REQUEST_TIMEOUT_S,
        )
        items = body.get("items", []) if isinstance(body, dict) else []
        return [o for o in items if o.get("spec", {}).get("driver") == self._driver]

    def _our_slices(self) -> list[str]:
        if self.api_version is None:
            return []  # never reached the server: nothing of ours can be there
        return sorted(o["metadata"]["name"] for o in self._list())

    def _write(self, obj: dict[str, Any], current: dict[str, Any] | None) -> None:
        version, name = self.api_version or "v1", obj["metadata"]["name"]
        for _ in range(CONFLICT_RETRIES):
            try:
                if current is None:
                    self._objects.create_cluster_custom_object(
                        GROUP, version, PLURAL, obj, _request_timeout=REQUEST_TIMEOUT_S
                    )
                else:
                    body = {**obj, "metadata": {**obj["metadata"], **_version_of(current)}}
                    self._objects.replace_cluster_custom_object(
                        GROUP, version, PLURAL, name, body, _request_timeout=REQUEST_TIMEOUT_S
                    )
                return
            except ApiException as error:
                if error.status not in (404, 409):
                    raise
                # 409: someone else wrote it (or it exists already); 404: it was deleted. Read and retry.
                log.info("ResourceSlice %s: HTTP %s on write; re-reading it", name, error.status)
                current = self._get(name)
        raise RuntimeError(f"ResourceSlice {name}: still conflicting after {CONFLICT_RETRIES} attempts")

    def _get(self, name: str) -> dict[str, Any] | None:
        try:
            obj = self._objects.get_cluster_custom_object(
                GROUP, self.api_version or "v1", PLURAL, name, _request_timeout=REQUEST_TIMEOUT_S
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return obj if isinstance(obj, dict) else None

    def _delete(self, name: str) -> None:
        try:
            self._objects.delete_cluster_custom_object(
                GROUP, self.api_version or "v1", PLURAL, name, _request_timeout=REQUEST_TIMEOUT_S
            )
        except ApiException as error:
            if error.status != 404:  # already gone (the kubelet deletes them too): fine
                raise


def _version_of(obj: dict[str, Any]) -> dict[str, Any]:
    rv = obj.get("metadata", {}).get("resourceVersion")
    return {"resourceVersion": rv} if rv else {}


def _same(existing: dict[str, dict[str, Any]], desired: list[dict[str, Any]]) -> bool:
    """The server holds exactly these slices: same names, specs and owner."""
    if set(existing) != {o["metadata"]["name"] for o in desired}:
        return False
    for obj in desired:
        held = existing[obj["metadata"]["name"]]
        owners = held.get("metadata", {}).get("ownerReferences")
        if held.get("spec") != obj["spec"] or owners != obj["metadata"].get("ownerReferences"):
            return False
    return True
