"""NodeHealth: the runtime's one route for health, HealthWatcher -> the front-end -> metrics.

Boundary: wiring only. The watcher (device_plugin/health/watcher.py) decides and hands each typed
HealthTransition to one listener here, which gives it to a route (the front-end's on_health: the
device plugin applies it to the resources served now, the DRA driver marks its devices unhealthy and
republishes) and then counts it once in the metrics, labelled with the names the route changed and
the transition's own Xid. A rescan tells it the GPUs it found (the watcher watches exactly those);
replay() brings something made afresh (a new resource) to the current health.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from device_plugin.config.health import HealthConfig
from device_plugin.health.state import HealthTransition
from device_plugin.health.watcher import HealthWatcher, TransitionListener
from device_plugin.nvml.health_types import HealthSource
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.types import GpuInfo
from device_plugin.observability.metrics import PluginMetrics

log = logging.getLogger(__name__)

# applies a transition; the names it changed
HealthRoute = Callable[[HealthTransition], Sequence[str]]


class NodeHealth:
    def __init__(
        self,
        backend: NvmlBackend,
        gpus: Iterable[GpuInfo],
        config: HealthConfig,
        *,
        route: HealthRoute,
        metrics: PluginMetrics,
    ) -> None:
        self._route = route
        self._metrics = metrics
        self.watcher: HealthWatcher | None = None
        if isinstance(backend, HealthSource):
            self.watcher = HealthWatcher(
                backend, [g.index for g in gpus], config, listeners=[self.deliver]
            )
        else:
            log.warning("the NVML backend has no health source: devices are not health-checked")

    def deliver(self, transition: HealthTransition) -> None:
        """The watcher's listener: route `transition` (the kubelet hears of it first), then count it
        once."""
        changed = self._route(transition)
        self._metrics.health_transition(transition, changed)

    def rebuilt(self, gpus: Iterable[GpuInfo]) -> None:
        """After a rescan: watch `gpus` from now on (a GPU found later is health-watched too)."""
        if self.watcher is not None:
            self.watcher.set_gpus(g.index for g in gpus)

    def replay(self, listener: TransitionListener) -> None:
        """Tell `listener` every watched GPU that is not Healthy now (something made afresh starts
        Healthy)."""
        if self.watcher is not None:
            self.watcher.replay(listener)

    def start(self) -> None:
        if self.watcher is not None:
            self.watcher.start()

    def stop(self, timeout_s: float) -> None:
        if self.watcher is not None:
            self.watcher.stop(timeout_s=timeout_s)
