"""The running daemon: one node's resources served, watched, measured, and rebuilt when things change.

Daemon owns, for the life of the process: one PluginManager per resource (gRPC server + registration),
the HealthWatcher, the metrics registry and its HTTP endpoint, the node-labels file, and a rescan loop.
A rebuild (config file changed, SIGHUP, or the periodic rescan seeing a new MIG layout / GPU list)
builds the new resources first; if that fails the old ones keep serving. Then the resources that
changed or disappeared are stopped first (each sends an empty list, so no stale capacity stays) and
the new ones are served and registered. After a hardware change, resources whose devices are the
same keep serving untouched; after a config change every resource is served afresh (its policy or
Allocate answer may differ). No gRPC here: lifecycle does that.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from prometheus_client import CollectorRegistry

from device_plugin.composition import Node, build_node, envvar_conflicts
from device_plugin.config.model import Config, check_labels_file
from device_plugin.config.reading import read_regular_file
from device_plugin.errors import ConfigError, PluginError
from device_plugin.health.watcher import HealthWatcher
from device_plugin.kubelet.lifecycle import LifecycleTiming, PluginManager
from device_plugin.nvml.health_types import HealthSource
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.telemetry import TelemetrySource
from device_plugin.observability.http_endpoint import (
    EndpointProbeResult,
    HttpEndpoint,
    parse_metrics_address,
    registration_readiness,
)
from device_plugin.observability.labels import (
    FeaturesFileWriter,
    LabelOptions,
    MigResourceLabelInput,
    SharingLabelInput,
    refresh_features_file,
)
from device_plugin.observability.metrics import PluginMetrics
from device_plugin.resources import ResourceManager

log = logging.getLogger(__name__)

ConfigLoader = Callable[[], Config]
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
        self._load_config = load_config
        self._config_file = config_file
        self._config_digest = _digest(config_file)
        self._dev_root = dev_root
        self._timing = timing
        self._lock = threading.Lock()  # one rebuild at a time
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.registry = CollectorRegistry()
        self._node = self._build(config)
        for warning in envvar_conflicts(self._node, config):
            log.warning("config: %s", warning)
        gpus = self._node.gpus
        self.metrics = PluginMetrics(
            self.registry,
            device_snapshots=lambda: {r.resource_name: r.snapshot() for r in self._node.resources},
            gpus=lambda: gpus,
            telemetry=backend if isinstance(backend, TelemetrySource) else None,
            gpu_gauges=config.daemon.gpu_gauges,
            process_metrics=True,
        )
        self._watch_resources(self._node.resources)
        self._managers = {r.resource_name: self._manager_for(r) for r in self._node.resources}
        self.health: HealthWatcher | None = None
        if isinstance(backend, HealthSource):
            self.health = HealthWatcher(backend, [g.index for g in gpus], self._node.resources, config.daemon.health)
        else:
            log.warning("the NVML backend has no health source: devices are not health-checked")
        address = parse_metrics_address(config.daemon.metrics_address, field="gpuDevicePlugin.metricsAddress")
        self._endpoint = None
        if address is not None:
            self._endpoint = HttpEndpoint(
                *address,
                self.registry,
                liveness=self._liveness,
                readiness=registration_readiness(self.metrics.registration_snapshot),
            )
        self._labels = _labels_writer(config.daemon.labels_file, config.daemon.device_plugin_dir)

    # ---- public --------------------------------------------------------------------------------

    @property
    def node(self) -> Node:
        return self._node

    @property
    def managers(self) -> dict[str, PluginManager]:
        return dict(self._managers)

    def _liveness(self) -> EndpointProbeResult:
        for name, manager in sorted(list(self._managers.items())):  # a snapshot: a rebuild may be swapping them
            ok, detail = manager.serving()
            if not ok:
                return EndpointProbeResult(False, f"{name}: {detail}")
        return EndpointProbeResult(True, f"serving {len(self._managers)} resources")

    @property
    def endpoint(self) -> HttpEndpoint | None:
        return self._endpoint

    def start(self) -> None:
        if self._endpoint is not None:
            # First, and fatal (EndpointBindError): without probes the kubelet cannot tell we are alive.
            self._endpoint.start()
        try:
            if self.health is not None:
                self.health.start()
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
        if self.health is not None:
            self.health.stop(timeout_s=0.5)
        if self._endpoint is not None:
            self._endpoint.stop()
        if self._thread is not None:
            self._thread.join(timeout=max(0.1, deadline - time.monotonic()))

    # ---- rebuilds ------------------------------------------------------------------------------

    def _build(self, config: Config, previous: Node | None = None) -> Node:
        def on_decision(resource: str, decision) -> None:  # type: ignore[no-untyped-def]
            self.metrics.allocation_decision(
                resource,
                decision.size,
                decision.ring_bandwidth_gbps,
                decision.optimal,
                decision.best_possible_gbps,
                nic_distance=decision.nic_distance,
            )

        return build_node(self._backend, config, dev_root=self._dev_root, on_decision=on_decision, previous=previous)

    def _manager_for(self, resource: ResourceManager) -> PluginManager:
        return PluginManager(
            resource, self._config.daemon.device_plugin_dir, timing=self._timing, observer=self.metrics
        )

    def _watch_resources(self, resources: Iterable[ResourceManager]) -> None:
        for resource in resources:
            resource.add_health_listener(self.metrics.on_device_health_change)
            if resource.resource_name in self._node.advertised.shared:
                self.metrics.record_replicas(resource.resource_name, resource.snapshot().devices, self._node.gpus)

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
            config = self._reloaded_config()
            try:
                node = self._build(config, previous=self._node)
            except PluginError as error:
                log.error("rebuilding the resources failed, keeping the current ones: %s", error)
                return False
            serving_changed = _serving_settings(config) != _serving_settings(self._config)
            self._apply_daemon_settings(config)
            if not serving_changed and node.layout() == self._node.layout():
                return False
            self._switch(node, serving_changed)
            return True

    def _reloaded_config(self) -> Config:
        """The config file's new content if it changed and is valid; else the running config."""
        digest = _digest(self._config_file)
        if self._load_config is None or digest == self._config_digest:
            return self._config
        self._config_digest = digest  # a broken content is reported once, not at every rescan
        try:
            config = self._load_config()
            check_labels_file(config.daemon.labels_file, self._config.daemon.device_plugin_dir)  # the running dir
        except PluginError as error:
            log.error("config file changed but is invalid, keeping the running config: %s", error)
            return self._config
        log.info("config file changed; effective config now: %s", config.describe())
        return config

    def _apply_daemon_settings(self, config: Config) -> None:
        """Our own settings that do not touch the resources: applied now, or said to need a restart."""
        before, after = self._config.daemon, config.daemon
        labels_changed = after.labels_file != before.labels_file
        if labels_changed:
            self._labels = _labels_writer(after.labels_file, before.device_plugin_dir)
            log.info("labels file now %s", after.labels_file or "off")
        needs_restart = [
            name
            for name, old, new in (
                ("metricsAddress", before.metrics_address, after.metrics_address),
                ("gpuGauges", before.gpu_gauges, after.gpu_gauges),
                ("logFormat", before.log_format, after.log_format),
                ("health", before.health, after.health),
            )
            if old != new
        ]
        if needs_restart:
            log.warning(
                "config: gpuDevicePlugin.%s changed; it takes effect when the plugin restarts (the running "
                "value stays until then)",
                ", gpuDevicePlugin.".join(needs_restart),
            )
            config = replace(
                config,
                daemon=replace(
                    after,
                    metrics_address=before.metrics_address,
                    gpu_gauges=before.gpu_gauges,
                    log_format=before.log_format,
                    health=before.health,
                ),
            )
        self._config = replace(config, daemon=replace(config.daemon, device_plugin_dir=before.device_plugin_dir))
        if after.device_plugin_dir != before.device_plugin_dir:
            log.warning("config: gpuDevicePlugin.devicePluginDir changed; it takes effect when the plugin restarts")
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
        self._watch_resources(fresh)
        if self.health is not None:
            self.health.set_resources(resources)
        for resource in fresh:
            self._managers[resource.resource_name] = manager = self._manager_for(resource)
            try:
                manager.start()
            except Exception:  # the others still serve; /healthz reports this one, so the pod is restarted
                log.exception("%s: cannot start serving", resource.resource_name)
        self._refresh_labels()

    def _refresh_labels(self) -> None:
        if self._labels is None:
            return
        refresh_features_file(self._backend, label_options(self._node, self._config), self._labels)


def _serving_settings(config: Config) -> tuple[object, ...]:
    """The parts of the config that decide what is served and how: a change re-serves every resource."""
    return (config.flags, config.resources, config.sharing, config.imex)


def _stop_all(managers: Iterable[PluginManager], timeout_s: float) -> None:
    """Stop managers in parallel, so N resources still stop within one `timeout_s` (SIGTERM: < 5 s)."""
    deadline = time.monotonic() + timeout_s
    threads = [threading.Thread(target=m.stop, args=(timeout_s,), daemon=True) for m in managers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _digest(path: Path | None) -> str | None:
    if path is None:
        return None
    try:  # bounded and non-blocking: a FIFO or /dev/zero swapped in must not hang the rescan
        return hashlib.sha256(read_regular_file(path)).hexdigest()
    except ConfigError:
        return None


def _labels_writer(labels_file: str, device_plugin_dir: Path) -> FeaturesFileWriter | None:
    return FeaturesFileWriter(Path(labels_file), refuse_under=(device_plugin_dir,)) if labels_file else None


def label_options(node: Node, config: Config) -> LabelOptions:
    """What the node labels need to know beyond the backend: sharing and the MIG resources served."""
    sharing = {
        name: SharingLabelInput(
            "time-slicing",
            shared.replicas,
            renamed=name != shared.source_name,
            replica_memory_mib=node.replica_memory_mib.get(name),
        )
        for name, shared in node.advertised.shared.items()
    }
    mig_by_uuid = {d.uuid: d for devices in node.mig.devices_by_gpu.values() for d in devices}
    mig_resources = {}
    for resource in node.resources:
        devices = [mig_by_uuid[d.id] for d in resource.snapshot().devices if d.id in mig_by_uuid]
        if devices and resource.resource_name.startswith("nvidia.com/mig-"):
            mig_resources[resource.resource_name] = MigResourceLabelInput(
                count=len(devices),
                memory_mib=min(d.memory_mib for d in devices),
                multiprocessors=min(d.multiprocessor_count for d in devices),
            )
    return LabelOptions(mig_strategy=config.flags.mig_strategy, sharing=sharing, mig_resources=mig_resources)
