"""Which pod's container holds which of this node's GPUs, from the kubelet's pod-resources API, for
/metrics.

Boundary: joins what the kubelet says (dra_helper/pod_resources.py) with the node's GPU and MIG
UUIDs; the metric is observability's (collectors.PodGpuCollector). A device counts when it names one
of this node's UUIDs: a device plugin's device ID (a GPU or MIG UUID, a time-sliced replica
`<uuid>::<n>`), or a DRA device's CDI name (`nvidia.com/gpu=<uuid>`, as our driver answers). So both
modes, and other drivers that name NVIDIA's CDI devices, are seen; dcgm-exporter's series, labelled
by UUID, join on it. A failed read is logged when its reason changes (not every scrape) and raises
on, for the metric's count.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from device_plugin.core.ids import REPLICA_SEPARATOR
from device_plugin.core.names import CDI_KIND
from device_plugin.dra_helper.pod_resources import (
    POD_RESOURCES_SOCKET,
    ContainerDevice,
    PodResourcesError,
    list_container_devices,
)
from device_plugin.node.inventory import NodeInventory

log = logging.getLogger(__name__)


@dataclass(frozen=True, order=True)
class PodGpu:
    namespace: str
    pod: str
    container: str
    uuid: str  # the GPU's or MIG device's
    resource: str  # the device plugin's resource name, or the DRA driver's name


def node_uuids(inventory: NodeInventory) -> frozenset[str]:
    """Every GPU and MIG device UUID of the node."""
    migs = (m.uuid for devices in inventory.mig.devices_by_gpu.values() for m in devices)
    return frozenset(g.uuid for g in inventory.gpus) | frozenset(migs)


def pod_gpus(devices: Iterable[ContainerDevice], uuids: frozenset[str]) -> list[PodGpu]:
    """The containers' devices that are this node's GPUs, each once, sorted."""
    found = set()
    for device in devices:
        named = [c.partition("=")[2] for c in device.cdi_devices if c.startswith(f"{CDI_KIND}=")]
        named.append(device.device.partition(REPLICA_SEPARATOR)[0])
        for uuid in named:
            if uuid in uuids:
                found.add(
                    PodGpu(device.namespace, device.pod, device.container, uuid, device.source)
                )
    return sorted(found)


class PodGpuReader:
    """Reads the kubelet's answer at scrape time; `kubelet_dir` is the parent of devicePluginDir."""

    def __init__(
        self, kubelet_dir: Path, uuids: Callable[[], frozenset[str]], timeout_s: float = 1.0
    ) -> None:
        self.socket = kubelet_dir / POD_RESOURCES_SOCKET
        self._uuids = uuids
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._last_error = ""

    def __call__(self) -> list[PodGpu]:
        try:
            devices = list_container_devices(self.socket, self._timeout_s)
        except PodResourcesError as error:
            self._note(str(error))
            raise
        self._note("")
        return pod_gpus(devices, self._uuids())

    def _note(self, error: str) -> None:
        with self._lock:
            changed, self._last_error = error != self._last_error, error
        if changed and error:
            log.warning("GPUs per pod are not exported: the kubelet's pod-resources API: %s", error)
        elif changed:
            log.info("GPUs per pod: reading the kubelet's pod-resources API again")
