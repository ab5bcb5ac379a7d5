"""The DRA driver as a running thing: NVML + health in, kubelet sockets and ResourceSlices out.

Boundary: composition and the rescan thread only. It wires the shared machinery (an NVML backend,
the HealthWatcher, the topology) to the DRA parts: the Preparer and its gRPC servers (kubelet side),
and the SlicePublisher (API side). What it decides:
- the published devices are the node's devices minus those of unhealthy GPUs (a GPU's MIG devices
  go with it); a health transition republishes at once, so an unhealthy GPU leaves the pool and comes
  back on recovery (partitions are recomputed over the healthy GPUs);
- a rescan (every rescanIntervalSeconds, SIGHUP, config-file change) re-reads GPUs and MIG layouts
  and republishes when they changed; the config's driverName is read at start only (a changed
  name needs a restart: it renames the sockets, the slices and the claims' results);
- when the kubelet (re)registers us it may have wiped the node's slices: we reconcile again;
- the kubelet directory is the parent of devicePluginDir (/var/lib/kubelet by default): the
  registration socket goes to plugins_registry/, the DRA socket and the checkpoint to plugins/<driver>/.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from device_plugin.config.model import Config
from device_plugin.core.devices import Health
from device_plugin.dra.checkpoint import Checkpoint
from device_plugin.dra.grpc_service import DraGrpcServer, SocketPaths
from device_plugin.dra.inventory import DraDevice, build_devices
from device_plugin.dra.kube import ApiClaimReader, newest_resource_version
from device_plugin.dra.prepare import Preparer
from device_plugin.dra.publisher import SlicePublisher
from device_plugin.health.state import HealthTransition
from device_plugin.health.watcher import HealthWatcher
from device_plugin.nvml.health_types import HealthSource
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.types import GpuInfo
from device_plugin.topology.build import build_topology
from device_plugin.topology.model import Topology

log = logging.getLogger(__name__)


class _ClaimsInDiscoveredVersion:
    """ResourceClaims are read in the resource.k8s.io version the publisher discovered (or discover it)."""

    def __init__(self, client: k8s.ApiClient, publisher: SlicePublisher) -> None:
        self._client = client
        self._publisher = publisher
        self._reader: ApiClaimReader | None = None

    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        if self._reader is None:
            version = self._publisher.api_version or newest_resource_version(self._client)
            self._reader = ApiClaimReader(self._client, version)
        return self._reader.get_claim(namespace, name)


class DraDriver:
    def __init__(
        self,
        backend: NvmlBackend,
        config: Config,
        *,
        client: k8s.ApiClient,
        node_name: str,
        kubelet_dir: Path | None = None,
        backoff_max_s: float = 5.0,
    ) -> None:
        self._backend = backend
        self._config = config
        self.driver_name = config.daemon.driver_name
        kubelet_dir = kubelet_dir or Path(config.daemon.device_plugin_dir).parent
        self._lock = threading.RLock()  # guards the device lists and the unhealthy set
        self._unhealthy: set[int] = set()
        self._topology = build_topology(backend)
        self._gpus: tuple[GpuInfo, ...] = tuple(backend.gpus())
        self._all: tuple[DraDevice, ...] = self._build(self._topology)
        self.on_devices_changed: Callable[[], None] | None = None  # after a rescan republished (labels)
        self.publisher = SlicePublisher(
            client, driver_name=self.driver_name, node_name=node_name, backoff_max_s=backoff_max_s
        )
        self.preparer = Preparer(
            driver_name=self.driver_name,
            pool_name=node_name,
            reader=_ClaimsInDiscoveredVersion(client, self.publisher),
            devices=self,
            checkpoint=Checkpoint(kubelet_dir / "plugins" / self.driver_name / "checkpoint.json"),
        )
        paths = SocketPaths.for_driver(self.driver_name, kubelet_dir)
        self.server = DraGrpcServer(self.driver_name, paths, self.preparer, on_registered=self.publisher.resync)
        self.health: HealthWatcher | None = None
        if isinstance(backend, HealthSource):
            indices = [g.index for g in backend.gpus()]
            self.health = HealthWatcher(backend, indices, config.daemon.health, listeners=[self._on_health])
        else:
            log.warning("the NVML backend has no health source: devices are not health-checked")
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- DeviceView (for the Preparer) ---------------------------------------------------------

    def device_uuids(self) -> Mapping[str, str]:
        with self._lock:
            return {d.name: d.uuid for d in self._all}

    def gpus(self) -> tuple[GpuInfo, ...]:
        """The GPUs of the last scan (the GPU gauges read them at scrape time)."""
        with self._lock:
            return self._gpus

    def add_health_listener(self, listener: Callable[[HealthTransition], None]) -> None:
        """Also tell `listener` every GPU health transition (the metrics count them)."""
        if self.health is not None:
            self.health.add_listener(listener)

    def unhealthy(self) -> frozenset[str]:
        with self._lock:
            return frozenset(d.name for d in self._all if d.gpu_index in self._unhealthy)

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self.publisher.start()
        self._publish()
        self.server.start()
        if self.health is not None:
            self.health.start()
        self._thread = threading.Thread(target=self._rescan_loop, name="dra-rescan", daemon=True)
        self._thread.start()

    def request_rescan(self) -> None:
        self._wake.set()

    def stop(self, timeout_s: float = 3.5) -> None:
        """Sockets first (the kubelet deregisters us), then our slices are deleted."""
        self._stop.set()
        self._wake.set()
        self.server.stop(0.5)
        if self.health is not None:
            self.health.stop(timeout_s=0.5)
        self.publisher.stop(timeout_s=max(1.0, timeout_s - 1.0), unpublish=True)
        if self._thread is not None:
            self._thread.join(timeout=0.5)

    # ---- what is published ---------------------------------------------------------------------

    def published_devices(self) -> tuple[DraDevice, ...]:
        with self._lock:
            sick = {d.uuid for d in self._all if d.gpu_index in self._unhealthy}  # a GPU and its MIG devices
            if not sick:
                return self._all
            return self._build(self._topology, exclude_uuids=sick)

    def _build(
        self, topology: Topology, exclude_uuids: frozenset[str] | set[str] = frozenset()
    ) -> tuple[DraDevice, ...]:
        return build_devices(self._backend, topology, exclude_uuids=exclude_uuids)[0]

    def _publish(self) -> None:
        self.publisher.request(self.published_devices())

    def _on_health(self, transition: HealthTransition) -> None:
        with self._lock:
            before = set(self._unhealthy)
            if transition.after is Health.HEALTHY:
                self._unhealthy.discard(transition.gpu_index)
            else:
                self._unhealthy.add(transition.gpu_index)
            changed = before != self._unhealthy
        if changed:
            log.info("GPU %d is %s (%s): republishing", transition.gpu_index, transition.after, transition.reason)
            self._publish()

    def rescan(self) -> bool:
        """Re-read GPUs and MIG layouts; republish if the devices changed. True if they did."""
        try:
            topology = build_topology(self._backend)
            gpus = tuple(self._backend.gpus())
            devices = self._build(topology)
        except Exception:  # a failing NVML read keeps what is published
            log.exception("rescan failed; the published devices stay")
            return False
        with self._lock:
            if devices == self._all:
                return False
            self._all, self._topology, self._gpus = devices, topology, gpus
        log.info("devices changed (MIG layout or GPUs): republishing %d devices", len(devices))
        if self.health is not None:  # a GPU found later is health-watched too
            self.health.set_gpus(g.index for g in gpus)
        self._publish()
        if self.on_devices_changed is not None:
            self.on_devices_changed()
        return True

    def _rescan_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._config.daemon.rescan_interval_s)
            self._wake.clear()
            if not self._stop.is_set():
                self.rescan()
