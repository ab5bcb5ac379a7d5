"""The device-plugin front-end: the node's resources, each served to the kubelet by its own
PluginManager.

Boundary: implements node/front_end_protocol.py's FrontEnd over dp/composition.py (inventory +
config -> the ResourceManagers) and dp_helper/lifecycle.py (one PluginManager per resource: gRPC
server, registration, kubelet restarts). The runtime (node/runtime.py) owns everything else: the
inventory, health, reloads, metrics, probes and labels.

What apply() decides: the resources are composed first; if that fails (a changed config naming a GPU
that is gone) nothing changes. Then the resources that changed or disappeared are stopped first
(each sends an empty list, so no stale capacity stays) and the new ones are served and registered.
After a hardware change, resources whose devices are the same keep serving untouched; after a change
of a serving setting every resource is served afresh (its policy or Allocate answer may differ).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.file_reload import ConfigLoader
from device_plugin.config.model import Config
from device_plugin.core.devices import DeviceListSnapshot
from device_plugin.dp.composition import Node, compose_node, envvar_conflicts
from device_plugin.dp.resource_reporting import (
    decision_hook,
    label_options,
    record_replicas,
    resource_route,
)
from device_plugin.dp_helper.lifecycle import LifecycleTiming, PluginManager
from device_plugin.dp_helper.plugin_dir import SocketNaming
from device_plugin.health.state import HealthTransition
from device_plugin.node.front_end_protocol import RuntimeContext
from device_plugin.node.inventory import NodeInventory
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.observability.http_endpoint import EndpointProbeResult, registration_readiness
from device_plugin.observability.labels import LabelOptions
from device_plugin.observability.metrics import DeviceSnapshots

log = logging.getLogger(__name__)


class DevicePluginFrontEnd:
    name = "device plugin"

    def __init__(
        self,
        *,
        dev_root: Path = Path("/dev"),
        timing: LifecycleTiming | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._dev_root = dev_root
        self._timing = timing
        self._env = os.environ if env is None else env  # POD_UID, for per-instance socket names
        self._naming = SocketNaming()
        self._context: RuntimeContext | None = None
        self._node: Node | None = None
        self._plugin_dir = Path()
        self._managers: dict[str, PluginManager] = {}
        self._started = False
        self._route = resource_route(lambda: self.node.resources)

    # ---- what the runtime and tests read -------------------------------------------------------

    @property
    def node(self) -> Node:
        """The resources served now (composed over the runtime's inventory)."""
        assert self._node is not None, "apply() first"
        return self._node

    @property
    def managers(self) -> dict[str, PluginManager]:
        return dict(self._managers)

    @property
    def inventory_feed(self) -> DeviceSnapshots:
        return self._snapshots

    def _snapshots(self) -> Mapping[str, DeviceListSnapshot]:
        node = self._node
        return {} if node is None else {r.resource_name: r.snapshot() for r in node.resources}

    # ---- FrontEnd ------------------------------------------------------------------------------

    def attach(self, context: RuntimeContext) -> None:
        self._context = context

    def apply(self, inventory: NodeInventory, config: Config, *, serving_changed: bool) -> bool:
        context = self._require_context()
        on_decision = decision_hook(lambda: context.metrics)
        node = compose_node(
            context.backend,
            inventory,
            config,
            dev_root=self._dev_root,
            on_decision=on_decision,
            rescan=self._node is not None,
        )
        if self._node is None:  # the first: prepared here, served by start()
            for warning in envvar_conflicts(node, config):
                log.warning("config: %s", warning)
            # The directory and socket naming are read at start only (restart-only): later configs
            # keep the first.
            self._plugin_dir = config.daemon.device_plugin_dir
            self._naming = SocketNaming.of(config.daemon.socket_names, self._env)
            if self._naming.per_instance:
                log.info(
                    "socket names per instance: id %s (gpuDevicePlugin.socketNames)",
                    self._naming.instance,
                )
            self._node = node
            record_replicas(context.metrics, node, node.resources)
            self._managers = {r.resource_name: self._manager_for(r) for r in node.resources}
            return True
        if not serving_changed and node.layout() == self._node.layout():
            return False
        self._switch(node, serving_changed)
        return True

    def on_health(self, transition: HealthTransition) -> tuple[str, ...]:
        return tuple(self._route(transition))

    def label_options(self, config: Config) -> LabelOptions:
        return label_options(self.node, config)

    def liveness(self) -> EndpointProbeResult:
        served = sorted(self._managers.items())  # a snapshot: a rebuild may be swapping them
        for name, manager in served:
            ok, detail = manager.serving()
            if not ok:
                return EndpointProbeResult(False, f"{name}: {detail}")
        return EndpointProbeResult(True, f"serving {len(served)} resources")

    def readiness(self) -> EndpointProbeResult:
        # the cause first: "unregistered" alone hides it
        for name, manager in sorted(self._managers.items()):
            if waiting := manager.socket_taken():
                return EndpointProbeResult(False, f"{name}: {waiting}")
        return registration_readiness(self._require_context().metrics.registration_snapshot)()

    def start(self) -> None:
        self._started = True
        for manager in self._managers.values():
            manager.start()

    def stop(self, timeout_s: float) -> bool:
        """Every resource sends its empty list and stops, in parallel (SIGTERM: within one
        `timeout_s`)."""
        return _stop_all(list(self._managers.values()), timeout_s)

    # ---- re-serving ----------------------------------------------------------------------------

    def _require_context(self) -> RuntimeContext:
        assert self._context is not None, "attach() first"
        return self._context

    def _manager_for(self, resource: ResourceManager) -> PluginManager:
        observer = self._require_context().metrics
        return PluginManager(
            resource, self._plugin_dir, timing=self._timing, observer=observer, naming=self._naming
        )

    def _switch(self, node: Node, serving_changed: bool) -> None:
        context = self._require_context()
        before, after = self.node.layout(), node.layout()
        # Hardware changed: resources with the same devices keep serving. Their settings changed:
        # all afresh.
        kept = {
            name for name, ids in after.items() if not serving_changed and before.get(name) == ids
        }
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
            context.metrics.forget_resource(name)
        old = {r.resource_name: r for r in self.node.resources}
        resources = tuple(
            old[r.resource_name] if r.resource_name in kept else r for r in node.resources
        )
        fresh = [r for r in resources if r.resource_name not in kept]
        self._node = replace(node, resources=resources)
        record_replicas(context.metrics, self._node, fresh)
        for resource in fresh:  # they start all Healthy: the GPUs that are not are replayed to them
            context.replay_health(resource.on_health_transition)
        for resource in fresh:
            self._managers[resource.resource_name] = manager = self._manager_for(resource)
            if not self._started:
                continue
            try:
                manager.start()
            # the others still serve; /healthz reports this one, so the pod is restarted
            except Exception:
                log.exception("%s: cannot start serving", resource.resource_name)


def _stop_all(managers: Iterable[PluginManager], timeout_s: float) -> bool:
    """Stop managers in parallel, so N resources still stop within one `timeout_s`. False if one did
    not."""
    deadline = time.monotonic() + timeout_s
    threads = [threading.Thread(target=m.stop, args=(timeout_s,), daemon=True) for m in managers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return not any(thread.is_alive() for thread in threads)


def device_plugin_runtime(
    backend: NvmlBackend,
    config: Config,
    *,
    load_config: ConfigLoader | None = None,
    config_file: Path | None = None,
    dev_root: Path = Path("/dev"),
    timing: LifecycleTiming | None = None,
    env: Mapping[str, str] | None = None,
) -> NodeRuntime[DevicePluginFrontEnd]:
    """The node runtime serving the device plugin (what `run` builds in mode device-plugin)."""
    front_end = DevicePluginFrontEnd(dev_root=dev_root, timing=timing, env=env)
    return NodeRuntime(backend, config, front_end, load_config=load_config, config_file=config_file)
