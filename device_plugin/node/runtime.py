"""The running node, in either mode: its inventory scanned, served by a front-end, health-watched,
measured, and re-served when the hardware or the config file changes.

NodeRuntime owns, for the life of the process: the backend's inventory (GPUs, MIG devices, Topology
and the Allocator over them, node/inventory.py), the HealthWatcher and its route
(node/health_routing.py), the metrics registry, the HTTP endpoint and the node-labels file
(node/reporting.py), and the rescan loop. What the kubelet sees is the front-end's
(node/front_end_protocol.py): the device plugin's PluginManagers or the DRA driver's sockets and
ResourceSlices.

A rescan (every rescanIntervalSeconds, the config-file watch, SIGHUP) re-reads the config file (if
it
changed) and the hardware. A changed config is sorted by its fields' reload classes
(node/reloads.py): serving settings serve everything afresh, labelsFile and rescanIntervalSeconds
apply at once, and restart-only and start-only fields (mode, driverName) keep their running values,
logged as needing a restart; an invalid file is refused (config/file_reload.py) and the running
config stays. The front-end applies the new inventory and config, changing only what differs; when
it cannot serve a changed config on these GPUs the old one keeps serving, and the changed config is
offered again at each rescan.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import astuple
from pathlib import Path
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry

from device_plugin.config.file_reload import ConfigFileReload, ConfigLoader
from device_plugin.config.model import Config
from device_plugin.core.errors import PluginError
from device_plugin.health.watcher import HealthWatcher
from device_plugin.node.front_end_protocol import FrontEnd, RuntimeContext
from device_plugin.node.health_routing import NodeHealth
from device_plugin.node.inventory import NodeInventory, scan_inventory
from device_plugin.node.pod_gpus import PodGpuReader, node_uuids
from device_plugin.node.reloads import Settled, settle
from device_plugin.node.reporting import labels_writer, node_endpoint, node_metrics, refresh_labels
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.observability.http_endpoint import HttpEndpoint

log = logging.getLogger(__name__)

REBUILD_WAIT_S = 1.0  # how long stop() waits for a rebuild in progress before stopping without it
F = TypeVar("F", bound=FrontEnd)


class NodeRuntime(Generic[F]):
    def __init__(
        self,
        backend: NvmlBackend,
        config: Config,
        front_end: F,
        *,
        load_config: ConfigLoader | None = None,
        config_file: Path | None = None,
    ) -> None:
        """Scans the node and lets the front-end prepare what start() serves. Raises PluginError (a
        ConfigError when the config cannot be served on these GPUs)."""
        self._backend = backend
        self._config = config
        self.front_end = front_end
        self._reload = ConfigFileReload(load_config, config_file)
        self._lock = threading.Lock()  # one rebuild at a time
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._inventory = scan_inventory(backend)
        self.registry = CollectorRegistry()
        self.metrics = node_metrics(
            self.registry,
            backend,
            front_end.inventory_feed,
            lambda: self._inventory.gpus,
            gpu_gauges=config.daemon.gpu_gauges,
        )
        reader = PodGpuReader(
            Path(config.daemon.device_plugin_dir).parent, lambda: node_uuids(self._inventory)
        )
        self.metrics.pod_gpus(lambda: [astuple(row) for row in reader()])
        self._health = NodeHealth(
            backend,
            self._inventory.gpus,
            config.daemon.health,
            route=front_end.on_health,
            metrics=self.metrics,
        )
        front_end.attach(RuntimeContext(backend, self.metrics, self._health.replay))
        front_end.apply(self._inventory, config, serving_changed=False)
        self._endpoint = node_endpoint(config, self.registry, front_end)
        self._labels = labels_writer(config.daemon.labels_file, config.daemon.device_plugin_dir)

    # ---- public --------------------------------------------------------------------------------

    @property
    def inventory(self) -> NodeInventory:
        return self._inventory

    @property
    def config(self) -> Config:
        return self._config

    @property
    def health(self) -> HealthWatcher | None:
        return self._health.watcher

    @property
    def endpoint(self) -> HttpEndpoint | None:
        return self._endpoint

    def start(self) -> None:
        if self._endpoint is not None:
            # First, and fatal (EndpointBindError): without probes the kubelet cannot tell we are
            # alive.
            self._endpoint.start()
        try:
            self._health.start()
            self.front_end.start()
        # e.g. no inotify instance left: stop what started, so nothing serves half-alive
        except Exception:
            self.stop()
            raise
        self._refresh_labels()
        self._thread = threading.Thread(target=self._rescan_loop, name="rescan", daemon=True)
        self._thread.start()

    def request_rescan(self) -> None:
        """SIGHUP and the config-file watch call this: re-read config and hardware soon."""
        self._wake.set()

    def stop(self, timeout_s: float = 4.0) -> bool:
        """The front-end first (the kubelet must keep nothing stale), then the rest. False if cut
        short.

        A rebuild in progress gets up to REBUILD_WAIT_S to finish first (one lock); one that starts
        later sees the stop and does nothing.
        """
        deadline = time.monotonic() + timeout_s
        self._stopping.set()
        self._wake.set()
        # A rebuild stuck in a blocking read must not hold the stop: wait for it only so long.
        locked = self._lock.acquire(timeout=min(REBUILD_WAIT_S, timeout_s / 3))
        if locked:
            self._lock.release()
        else:
            log.warning(
                "a rebuild is still running after %.1f s; stopping the %s anyway",
                REBUILD_WAIT_S,
                self.front_end.name,
            )
        clean = self.front_end.stop(max(0.5, deadline - time.monotonic() - 1.0))
        self._health.stop(timeout_s=0.5)
        if self._endpoint is not None:
            self._endpoint.stop()
        if self._thread is not None:
            self._thread.join(timeout=max(0.1, deadline - time.monotonic()))
        return clean and locked

    # ---- rebuilds ------------------------------------------------------------------------------

    def _rescan_loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self._config.daemon.rescan_interval_s)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self.rebuild()
            except Exception:  # a rescan bug must leave what is served serving
                log.exception("rescan failed; what is served keeps serving")

    def rebuild(self) -> bool:
        """Re-read config (if it changed) and hardware; re-serve what differs. True if anything was
        re-served."""
        with self._lock:
            if self._stopping.is_set():
                return False
            loaded = self._reload.reloaded(self._config)
            try:
                inventory = scan_inventory(self._backend, self._inventory)
            except PluginError as error:
                log.error("rescanning the GPUs failed, keeping what is served: %s", error)
                if loaded is not self._config:
                    self._reload.unserved(loaded)
                return False
            self._health.rebuilt(inventory.gpus)  # a GPU found later is health-watched too
            self._inventory = inventory
            settled = settle(self._config, loaded)
            changed = self._try_apply(inventory, settled, retried=loaded is not self._config)
            if changed is None and loaded is not self._config:
                # Valid, but not on these GPUs (say it names one that is gone): offered again at the
                # next rescan, so it applies once the GPUs allow; meanwhile the running config
                # follows the hardware.
                self._reload.unserved(loaded)
                settled = settle(self._config, self._config)
                changed = self._try_apply(inventory, settled, retried=False)
            if changed is None:
                return False
            self._apply_daemon_settings(settled, refresh=changed)
            return changed

    def _try_apply(
        self, inventory: NodeInventory, settled: Settled, *, retried: bool
    ) -> bool | None:
        try:
            return self.front_end.apply(
                inventory, settled.config, serving_changed=settled.serving_changed
            )
        except PluginError as error:
            again = " (the changed config is tried again at each rescan)" if retried else ""
            log.error(
                "rebuilding the resources failed, keeping the current ones%s: %s", again, error
            )
            return None

    def _apply_daemon_settings(self, settled: Settled, *, refresh: bool) -> None:
        """Our own settings that do not touch what is served: applied now, or said to need a
        restart."""
        before, after = self._config.daemon, settled.config.daemon
        labels_changed = after.labels_file != before.labels_file
        if labels_changed:
            if self._labels is not None:  # moved or off: stale labels must not stay with NFD
                self._labels.retire()
            self._labels = labels_writer(after.labels_file, before.device_plugin_dir)
            log.info("labels file now %s", after.labels_file or "off")
        if settled.needs_restart:
            log.warning(
                "config: %s changed; it takes effect when the plugin restarts (the running value "
                "stays until then)",
                ", ".join(settled.needs_restart),
            )
        self._config = settled.config
        if labels_changed or refresh:
            self._refresh_labels()

    def _refresh_labels(self) -> None:
        options = self.front_end.label_options(self._config)
        refresh_labels(self._backend, options, self._labels, self._inventory.topology)
