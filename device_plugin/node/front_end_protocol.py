"""FrontEnd: what serves the node's inventory to the kubelet, one per mode, behind one protocol.

Boundary: the protocol and what the runtime hands a front-end; no implementation. The runtime
(node/runtime.py) owns the backend, the inventory, health, the rescan and config-reload loop and the
reports (metrics, probes, labels); a front-end turns an inventory and a config into what the kubelet
sees. The two front-ends sit above node/ and import this module; node/ never imports them:
- dp/front_end.py, the device plugin: one PluginManager (gRPC server + registration) per resource;
- dra/front_end.py, the DRA driver: the DRA gRPC service, the Preparer and the SlicePublisher.
commands/run.py picks one by `gpuDevicePlugin.mode`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from device_plugin.config.model import Config
from device_plugin.health.state import HealthTransition
from device_plugin.health.watcher import TransitionListener
from device_plugin.node.inventory import NodeInventory
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.observability.http_endpoint import EndpointProbeResult
from device_plugin.observability.labels import LabelOptions
from device_plugin.observability.metrics import DeviceSnapshots, PluginMetrics


@dataclass(frozen=True)
class RuntimeContext:
    """What the runtime lends a front-end for its life (attach)."""

    backend: NvmlBackend
    metrics: PluginMetrics
    # tells `listener` every GPU that is not Healthy now
    replay_health: Callable[[TransitionListener], None]


class FrontEnd(Protocol):
    name: str  # for log lines: "device plugin", "DRA driver"

    @property
    def inventory_feed(self) -> DeviceSnapshots | None:
        """What the inventory gauge reads at scrape time; None: this mode has no such gauge."""
        ...

    def attach(self, context: RuntimeContext) -> None:
        """Called once, before the first apply()."""
        ...

    def apply(self, inventory: NodeInventory, config: Config, *, serving_changed: bool) -> bool:
        """Serve `inventory` under `config`, changing only what differs (everything when
        `serving_changed`).

        Before start() this prepares what start() serves. Raises PluginError, before anything
        changed, when `config` cannot be served on this inventory. True if anything was served
        afresh."""
        ...

    def on_health(self, transition: HealthTransition) -> tuple[str, ...]:
        """Apply one GPU health transition; the names it changed (the metric's `resource` label).
        Fast: the health watcher waits for it."""
        ...

    def label_options(self, config: Config) -> LabelOptions:
        """What the node labels need to know beyond the backend."""
        ...

    def liveness(self) -> EndpointProbeResult: ...

    def readiness(self) -> EndpointProbeResult: ...

    def start(self) -> None:
        """Serve what the last apply() prepared. Raises when it cannot (the runtime stops
        everything)."""
        ...

    def stop(self, timeout_s: float) -> bool:
        """Stop serving within `timeout_s`; the kubelet keeps nothing stale. False if cut short."""
        ...
