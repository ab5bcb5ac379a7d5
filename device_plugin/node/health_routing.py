"""NodeHealth: the daemon's one route for health, HealthWatcher -> ResourceManagers -> metrics.

Boundary: wiring only. The watcher (device_plugin/health/watcher.py) decides and hands each typed
HealthTransition to one listener here, which applies it to the resources served now (their devices and
ListAndWatch streams) and then counts it once in the metrics, labelled with the resources it changed and
the transition's own Xid. A rebuild tells it the GPUs the rescan found (the watcher watches exactly those)
and the resources it made afresh (they start all Healthy, so the GPUs that are not are replayed to them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.health import HealthConfig
from device_plugin.health.state import HealthTransition
from device_plugin.health.watcher import HealthWatcher
from device_plugin.nvml.health_types import HealthSource
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.types import GpuInfo
from device_plugin.observability.metrics import PluginMetrics

log = logging.getLogger(__name__)


class NodeHealth:
    def __init__(
        self,
        backend: NvmlBackend,
        gpus: Iterable[GpuInfo],
        config: HealthConfig,
        *,
        resources: Callable[[], Sequence[ResourceManager]],
        metrics: PluginMetrics,
    ) -> None:
        """`resources`: the resources served now (read at each transition, so a rebuild's swap is seen)."""
        self._resources = resources
        self._metrics = metrics
        self.watcher: HealthWatcher | None = None
        if isinstance(backend, HealthSource):
            self.watcher = HealthWatcher(backend, [g.index for g in gpus], config, listeners=[self.deliver])
        else:
            log.warning("the NVML backend has no health source: devices are not health-checked")

    def deliver(self, transition: HealthTransition) -> None:
        """The watcher's listener: apply `transition` to the resources served now, then count it once."""
        # Resources first (the kubelet hears of it), then one count for the physical GPU.
        changed = [r.resource_name for r in self._resources() if r.on_health_transition(transition)]
        self._metrics.health_transition(transition, changed)

    def rebuilt(self, gpus: Iterable[GpuInfo], fresh: Iterable[ResourceManager] = ()) -> None:
        """After a rescan: watch `gpus` from now on, and bring `fresh` resources to the current health."""
        if self.watcher is None:
            return
        self.watcher.set_gpus(g.index for g in gpus)
        for resource in fresh:
            self.watcher.replay(resource.on_health_transition)

    def start(self) -> None:
        if self.watcher is not None:
            self.watcher.start()

    def stop(self, timeout_s: float) -> None:
        if self.watcher is not None:
            self.watcher.stop(timeout_s=timeout_s)
