"""The running daemon: one node's resources served, watched, measured, and rebuilt when things change.

Daemon owns, for the life of the process: one PluginManager per resource (gRPC server + registration),
the HealthWatcher, the metrics registry and its HTTP endpoint, the node-labels file, and a rescan loop.
A rebuild (config file changed, SIGHUP, or the periodic rescan seeing a new MIG layout / GPU list)
builds the new resources first; if that fails the old ones keep serving (a changed config that
fails there, say naming a GPU that is gone, is tried again at each rescan until it serves). Then the resources that
changed or disappeared are stopped first (each sends an empty list, so no stale capacity stays) and
the new ones are served and registered. After a hardware change, resources whose devices are the
same keep serving untouched; after a config change every resource is served afresh (its policy or
Allocate answer may differ). Every rescan hands the GPUs it found to the health watch and the GPU gauges.
Health routing is device_plugin/node/health_routing.py; metrics, endpoint and labels device_plugin/node/reporting.py.
No gRPC here: lifecycle does that.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from prometheus_client import CollectorRegistry

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.file_reload import ConfigFileReload, ConfigLoader
from device_plugin.config.model import Config
from device_plugin.config.reload import keep_restart_only, serving_settings
from device_plugin.core.errors import PluginError
from device_plugin.health.watcher import HealthWatcher
from device_plugin.kubelet.lifecycle import LifecycleTiming, PluginManager
from device_plugin.node.composition import Node, build_node, envvar_conflicts
from device_plugin.node.health_routing import NodeHealth
from device_plugin.node.reporting import (
    decision_hook,
    labels_writer,
    node_endpoint,
    node_metrics,
    record_replicas,
    refresh_labels,
)
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.types import GpuInfo
from device_plugin.observability.http_endpoint import HttpEndpoint

log = logging.getLogger(__name__)

REBUILD_WAIT_S = 1.0  # how long stop() waits for a rebuild in progress before stopping without it


class Daemon:
    def __init__(
        self,
        backend: NvmlBackend,
        config: Config,
        *,
        load_config: ConfigLoader | None = None,
        config_file: Path | None = None,
        dev_root: Path = Path("/dev"),
        timing: LifecycleTiming | None = None,
    ) -> None:
        self._backend = backend
        self._config = config
        self._reload = ConfigFileReload(load_config, config_file)
        self._dev_root = dev_root
        self._timing = timing
        self._lock = threading.Lock()  # one rebuild at a time
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.registry = CollectorRegistry()
        self._node = self._build(config)
        self._gpus: tuple[GpuInfo, ...] = self._node.gpus  # what the last scan found (gauges, health)
        for warning in envvar_conflicts(self._node, config):
            log.warning("config: %s", warning)
        self.metrics = node_metrics(
            self.registry, backend, lambda: self._node, lambda: self._gpus, gpu_gauges=config.daemon.gpu_gauges
        )
        record_replicas(self.metrics, self._node, self._node.resources)
        self._managers = {r.resource_name: self._manager_for(r) for r in self._node.resources}
        self._health = NodeHealth(
            backend, self._gpus, config.daemon.health, resources=lambda: self._node.resources, metrics=self.metrics
        )
        self._endpoint = node_endpoint(config, self.registry, self.metrics, lambda: self._managers)
        self._labels = labels_writer(config.daemon.labels_file, config.daemon.device_plugin_dir)

    # ---- public --------------------------------------------------------------------------------

    @property
    def node(self) -> Node:
        return self._node

    @property
    def health(self) -> HealthWatcher | None:
        return self._health.watcher

    @property
    def managers(self) -> dict[str, PluginManager]:
        return dict(self._managers)

    @property
    def endpoint(self) -> HttpEndpoint | None:
        return self._endpoint

    def start(self) -> None:
        if self._endpoint is not None:
            # First, and fatal (EndpointBindError): without probes the kubelet cannot tell we are alive.
            self._endpoint.start()
        try:
            self._health.start()
            for manager in self._managers.values():
                manager.start()
        except Exception:  # e.g. no inotify instance left: stop what started, so nothing serves half-alive
            self.stop()
            raise
        self._refresh_labels()
        self._thread = threading.Thread(target=self._rescan_loop, name="rescan", daemon=True)
        self._thread.start()

    def request_rescan(self) -> None:
        """SIGHUP and the config-file watch call this: re-read config and hardware soon."""
        self._wake.set()

    def stop(self, timeout_s: float = 4.0) -> None:
        """Empty lists and stopped servers first (the kubelet must keep no stale capacity), then the rest.

        A rebuild in progress gets up to REBUILD_WAIT_S to finish first (one lock); one that starts later sees
        the stop and does nothing.
        """
        deadline = time.monotonic() + timeout_s
        self._stopping.set()
        self._wake.set()
        # A rebuild stuck in a blocking read must not hold the stop: wait for it only so long.
        locked = self._lock.acquire(timeout=min(REBUILD_WAIT_S, timeout_s / 3))
        managers = list(self._managers.values())
        if locked:
            self._lock.release()
        else:
            log.warning("a rebuild is still running after %.1f s; stopping the resources anyway", REBUILD_WAIT_S)
        _stop_all(managers, max(0.5, deadline - time.monotonic() - 1.0))
        self._health.stop(timeout_s=0.5)
        if self._endpoint is not None:
            self._endpoint.stop()
        if self._thread is not None:
            self._thread.join(timeout=max(0.1, deadline - time.monotonic()))

    # ---- rebuilds ------------------------------------------------------------------------------

    def _build(self, config: Config, previous: Node | None = None) -> Node:
        on_decision = decision_hook(lambda: self.metrics)
        return build_node(self._backend, config, dev_root=self._dev_root, on_decision=on_decision, previous=previous)

    def _manager_for(self, resource: ResourceManager) -> PluginManager:
        return PluginManager(
            resource, self._config.daemon.device_plugin_dir, timing=self._timing, observer=self.metrics
        )

    def _rescan_loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self._config.daemon.rescan_interval_s)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self.rebuild()
            except Exception:  # a rescan bug must leave the current resources serving
                log.exception("rescan failed; the current resources keep serving")

    def rebuild(self) -> bool:
        """Re-read config (if it changed) and hardware; re-serve what differs. True if anything was re-served."""
        with self._lock:
            if self._stopping.is_set():
                return False
            config = self._reload.reloaded(self._config)
            node = self._try_build(config)
            if node is None and config is not self._config:
                # Valid, but not on these GPUs (say it names one that is gone): offered again at the next
                # rescan, so it applies once the GPUs allow; meanwhile the running config follows the hardware.
                self._reload.unserved(config)
                config = self._config
                node = self._try_build(config)
            if node is None:
                return False
            self._gpus = node.gpus
            self._health.rebuilt(node.gpus)
            serving_changed = serving_settings(config) != serving_settings(self._config)
            self._apply_daemon_settings(config)
            if not serving_changed and node.layout() == self._node.layout():
                return False
            self._switch(node, serving_changed)
            return True

    def _try_build(self, config: Config) -> Node | None:
        try:
            return self._build(config, previous=self._node)
        except PluginError as error:
            retried = "" if config is self._config else " (the changed config is tried again at each rescan)"
            log.error("rebuilding the resources failed, keeping the current ones%s: %s", retried, error)
            return None

    def _apply_daemon_settings(self, config: Config) -> None:
        """Our own settings that do not touch the resources: applied now, or said to need a restart."""
        before, after = self._config.daemon, config.daemon
        labels_changed = after.labels_file != before.labels_file
        if labels_changed:
            self._labels = labels_writer(after.labels_file, before.device_plugin_dir)
            log.info("labels file now %s", after.labels_file or "off")
        kept = keep_restart_only(self._config, config)  # the fields declared restart-only keep their values
        if kept.changed:
            log.warning(
                "config: %s changed; it takes effect when the plugin restarts (the running value stays until then)",
                ", ".join(kept.changed),
            )
        self._config = kept.config
        if labels_changed:
            self._refresh_labels()

    def _switch(self, node: Node, serving_changed: bool) -> None:
        before, after = self._node.layout(), node.layout()
        # Hardware changed: resources with the same devices keep serving. Their settings changed: all afresh.
        kept = {name for name, ids in after.items() if not serving_changed and before.get(name) == ids}
        stopped = sorted(set(before) - kept)
        log.info(
            "re-serving: resources %s (was %s); stopping %s, keeping %s",
            ", ".join(f"{n}={len(ids)}" for n, ids in sorted(after.items())) or "none",
            ", ".join(f"{n}={len(ids)}" for n, ids in sorted(before.items())) or "none",
            ", ".join(stopped) or "none",
            ", ".join(sorted(kept)) or "none",
        )
        # Stopped first: each sends its empty list, so no stale capacity stays with the kubelet.
        _stop_all([self._managers.pop(name) for name in stopped], timeout_s=4.0)
        for name in sorted(set(before) - set(after)):
            self.metrics.forget_resource(name)
        old = {r.resource_name: r for r in self._node.resources}
        resources = tuple(old[r.resource_name] if r.resource_name in kept else r for r in node.resources)
        fresh = [r for r in resources if r.resource_name not in kept]
        self._node = replace(node, resources=resources)
        record_replicas(self.metrics, self._node, fresh)
        self._health.rebuilt(node.gpus, fresh)
        for resource in fresh:
            self._managers[resource.resource_name] = manager = self._manager_for(resource)
            try:
                manager.start()
            except Exception:  # the others still serve; /healthz reports this one, so the pod is restarted
                log.exception("%s: cannot start serving", resource.resource_name)
        self._refresh_labels()

    def _refresh_labels(self) -> None:
        refresh_labels(self._backend, self._node, self._config, self._labels)


def _stop_all(managers: Iterable[PluginManager], timeout_s: float) -> None:
    """Stop managers in parallel, so N resources still stop within one `timeout_s` (SIGTERM: < 5 s)."""
    deadline = time.monotonic() + timeout_s
    threads = [threading.Thread(target=m.stop, args=(timeout_s,), daemon=True) for m in managers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
