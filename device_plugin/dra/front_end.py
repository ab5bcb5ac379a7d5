"""The DRA front-end: the node's inventory as DRA devices, published as ResourceSlices and prepared
for the kubelet.

Boundary: implements node/front_end_protocol.py's FrontEnd over the kubelet-plugin helper
(dra_helper/plugin.py: the Preparer and its gRPC servers on the kubelet side, the SlicePublisher on
the API side) and our devices; the Preparer asks prepare_decision.py (the helper's Driver), which
this object shows the devices and their health whenever they change (`see`), and which wakes the
hint thread when the devices claims hold change. The runtime (node/runtime.py) owns the inventory,
health, rescans, config reloads, metrics, probes'
endpoint and labels. What it decides:
- the devices are derived from the runtime's inventory (its GPUs, MIG devices, Topology and the same
  Allocator): partitions and attributes are computed once per inventory, never per health change;
- health comes through the runtime's one health delivery (on_health): a transition only marks the
  GPU and hands the devices to the publisher's thread (request() returns at once). An unhealthy
  GPU's devices (its MIG devices with it) carry its taint (dra/taints.py: NVIDIA's keys for an Xid
  or a lost GPU, ours for the rest, NoSchedule), removed when it recovers; where the API server does
  not keep taints the publisher leaves those devices out of the pool instead
  (dra_helper/api/slices.py). The partition values stay those of the inventory (a claim that matches
  on bestSetK just finds its group short of the sick GPU). The same transitions feed `health`, which
  the kubelet watches through DRAResourceHealth (dra_helper/service/);
- a rescan whose inventory equals the last one costs a comparison and publishes nothing;
- when the kubelet (re)registers us it may have wiped the node's slices: we reconcile again;
- the driver name and the kubelet directory (the parent of devicePluginDir: registration socket in
  plugins_registry/, the DRA socket and the checkpoint in plugins/<driver>/) are read at start only.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from device_plugin.config.model import Config
from device_plugin.config.share_settings import ISOLATION_NONE, ISOLATION_PER_PROCESS
from device_plugin.core.devices import Health
from device_plugin.core.names import OWN_DOMAIN, own_name
from device_plugin.dra.attribute_budget import within_limit
from device_plugin.dra.hint_thread import HintThread
from device_plugin.dra.inventory import HINTS_NONE, DraDevice, inventory_devices
from device_plugin.dra.memory_shares import share_listing, shareable, shareable_memory
from device_plugin.dra.mps.share_setup import MpsShareSetup, share_setup_for
from device_plugin.dra.occupancy import Overrides, is_whole_gpu, occupancy_overrides, with_values
from device_plugin.dra.prepare_decision import PrepareDecision
from device_plugin.dra.single_order import RANK_ATTRIBUTE
from device_plugin.dra.start_settings import instance_of, kubelet_dir_of
from device_plugin.dra.taints import DeviceTaint, taint_for
from device_plugin.dra_helper.plugin import DraHelper, PluginOptions
from device_plugin.dra_helper.service.device_health import device_reports
from device_plugin.dra_helper.service.health_service import HEARTBEAT_S
from device_plugin.health.state import HealthTransition
from device_plugin.node.front_end_protocol import RuntimeContext
from device_plugin.node.inventory import NodeInventory
from device_plugin.observability.http_endpoint import EndpointProbeResult
from device_plugin.observability.labels import LabelOptions

log = logging.getLogger(__name__)


class DraFrontEnd:
    name = "DRA driver"
    inventory_feed = None  # no device-plugin resources in this mode: no inventory gauge

    def __init__(
        self,
        client: k8s.ApiClient,
        *,
        node_name: str,
        driver_name: str,
        kubelet_dir: Path,
        own_domain: str = OWN_DOMAIN,
        backoff_max_s: float = 5.0,
        health_heartbeat_s: float = HEARTBEAT_S,
        instance: str = "",
        mps: MpsShareSetup | None = None,
    ) -> None:
        self.driver_name = driver_name
        self.own_domain = own_domain  # of our own attributes (bestSetK, nvlinkDomain, NIC ones)
        self._context: RuntimeContext | None = None
        self._lock = threading.Lock()  # guards the device lists and the unhealthy set
        self._inventory: NodeInventory | None = None
        self._all: tuple[DraDevice, ...] = ()
        # device name -> UUID of `_all`, made when the devices change
        self._uuids: Mapping[str, str] = {}
        # GPU index -> its taint, while it is Unhealthy
        self._taints: Mapping[int, DeviceTaint] = {}
        # GPU index -> why it is Unhealthy (pod status shows it)
        self._reasons: Mapping[int, str] = {}
        self._health_checked = True  # False: health checks are off, the kubelet hears Unknown
        # values that follow the GPUs in use (dra/occupancy.py); {}: static
        self._overrides: Overrides = {}
        # memoryShares on, placementHints not none: the listing follows the shares
        self._share_order = False
        self._isolation = ISOLATION_NONE  # what shares get on this node (memoryShares on)
        # GPU UUID -> why its MPS daemon cannot serve (shares unhealthy)
        self._mps_trouble: Mapping[str, str] = {}
        # held, MiB shared
        self._shares: tuple[frozenset[str], Mapping[str, int]] = (frozenset(), {})
        self._started = False
        self._hints = HintThread(self._rehint)
        options = PluginOptions(
            driver_name, node_name, kubelet_dir, backoff_max_s, health_heartbeat_s, instance
        )
        # What claims hold is told to the decision on the prepare worker; the hints follow on their
        # own thread.
        self.decision = PrepareDecision(
            driver_name=driver_name, pool_name=node_name, on_held=self._hints.wake, mps=mps
        )
        if mps is not None:
            self._isolation = ISOLATION_PER_PROCESS
            mps.daemons.on_trouble = self._on_mps_trouble
        self.plugin = DraHelper(client, options, self.decision)
        # The helper's parts by name: the runtime's callers (tests, benchmarks, the demo) look at
        # them.
        self.health, self.publisher = self.plugin.health, self.plugin.publisher
        self.preparer, self.server = self.plugin.preparer, self.plugin.server

    @classmethod
    def for_config(
        cls,
        config: Config,
        client: k8s.ApiClient,
        *,
        node_name: str,
        instance: str | None = None,
        **options: Any,
    ) -> DraFrontEnd:
        """The driver name, own domain, kubelet directory (the parent of devicePluginDir) and, with
        `socketNames: per-instance`, the instance (POD_UID, unless `instance` is given) from
        `config`."""
        return cls(
            client,
            node_name=node_name,
            driver_name=config.daemon.driver_name,
            kubelet_dir=kubelet_dir_of(config),
            own_domain=config.daemon.own_domain,
            instance=instance_of(config, os.environ) if instance is None else instance,
            mps=share_setup_for(config),
            **options,
        )

    # ---- the hints that follow the GPUs in use
    # -------------------------------------------------------

    def unhealthy(self) -> frozenset[str]:
        """Names of the devices of unhealthy GPUs now (a Prepare of one is refused)."""
        return self.decision.unhealthy()

    def _rehint(self) -> None:
        """On the hint thread: the hints for the GPUs held now (dra/occupancy.py), republished if
        they changed."""
        with self._lock:
            changed = self._reranked_locked()
            published, started = self._published_locked(), self._started
        if changed and started:
            log.debug("the placement hints follow the GPUs in use now: republishing")
            self.publisher.request(published)

    # ---- what is published ---------------------------------------------------------------------

    def devices(self) -> tuple[DraDevice, ...]:
        """Every device of the inventory, healthy or not, in listing order."""
        return self._all

    def _published_locked(self) -> tuple[DraDevice, ...]:
        """What the publisher is handed: every device, those of unhealthy GPUs with their GPU's
        taint, whole GPUs with the hints that follow the GPUs in use."""
        if not self._taints and not self._overrides and not self._share_order:
            return self._all
        published = tuple(self._as_published(d) for d in self._all)
        if not self._share_order:
            return published
        return share_listing(published, *self._shares, own_name(self.own_domain, RANK_ATTRIBUTE))

    def _as_published(self, device: DraDevice) -> DraDevice:
        taints = (
            (self._taints[device.gpu_index],) if device.gpu_index in self._taints else device.taints
        )
        values = self._overrides.get(device.gpu_index) if is_whole_gpu(device.attributes) else None
        attributes = with_values(device.attributes, values) if values else device.attributes
        return replace(device, taints=taints, attributes=attributes)

    def _reranked_locked(self) -> bool:
        """The hints for the GPUs held or unhealthy now (the static values while none is); True if
        changed."""
        whole = [(d.gpu_index, d.attributes) for d in self._all if is_whole_gpu(d.attributes)]
        holdings = self.decision.holdings()
        held_uuids = {self._uuids.get(name) for name in holdings}  # a MIG device's former name too
        held = {d.gpu_index for d in self._all if d.uuid in held_uuids}
        allocator = self._inventory.allocator if self._inventory is not None else None
        overrides = (
            occupancy_overrides(allocator, whole, held | set(self._taints), self.own_domain)
            if allocator
            else {}
        )
        shares = (
            (holdings, dict(self.decision.shared_memory()))
            if self._share_order
            else (frozenset(), {})
        )
        changed = overrides != self._overrides or shares != self._shares
        self._overrides, self._shares = overrides, shares
        return changed

    def _marked_locked(self) -> None:
        """After the devices or the taints changed: what the prepare decision sees and the kubelet's
        health."""
        unhealthy = frozenset(
            n for d in self._all if d.gpu_index in self._taints for n in (d.name, *d.former_names)
        )
        self.decision.see(self._uuids, unhealthy, shareable_memory(self._all))
        named = ((d.name, d.gpu_index) for d in self._all)
        trouble = self._mps_trouble
        mps = {
            d.gpu_index: trouble[d.uuid]
            for d in self._all
            if d.allow_multiple_allocations and d.uuid in trouble
        }
        self.health.set(
            device_reports(named, {**mps, **self._reasons}, checked=self._health_checked)
        )

    def _on_mps_trouble(self, uuid: str, why: str) -> None:
        """A shared GPU's MPS daemon cannot serve (`why`), or serves again (""): its shares' health,
        not its taint."""
        with self._lock:
            trouble = {u: w for u, w in self._mps_trouble.items() if u != uuid}
            self._mps_trouble = {**trouble, uuid: why} if why else trouble
            self._marked_locked()

    # ---- FrontEnd ------------------------------------------------------------------------------

    def attach(self, context: RuntimeContext) -> None:
        self._context = context
        context.metrics.container_runtime_cdi(self._cdi)

    def _cdi(self) -> tuple[str, str, str] | None:
        verdict = self.plugin.cdi
        return None if verdict is None else (verdict.runtime, verdict.version, verdict.cdi)

    def apply(self, inventory: NodeInventory, config: Config, *, serving_changed: bool) -> bool:
        """Republish when the inventory's devices changed. Nothing in our devices depends on a
        serving setting."""
        if inventory == self._inventory:
            return False  # the common rescan: a comparison, nothing built, nothing published
        assert self._context is not None, "attach() first"
        built, _ = inventory_devices(
            self._context.backend,
            inventory,
            own_domain=self.own_domain,
            hints=config.daemon.placement_hints,
        )
        self._share_order = (
            config.daemon.memory_shares and config.daemon.placement_hints != HINTS_NONE
        )
        if config.daemon.memory_shares:
            built = shareable(built, self.own_domain, self._isolation)
        # one device over the API's limit would fail the whole pool
        devices, dropped = within_limit(built)
        for name, attributes in dropped.items():
            log.warning(
                "device %s has more than 32 attributes: left out %s", name, ", ".join(attributes)
            )
            self._context.metrics.dra_attributes_dropped(attributes)
        with self._lock:
            self._inventory = inventory
            self._health_checked = config.daemon.health.enabled
            if devices == self._all:
                return False
            self._all = devices
            # a Prepare takes both
            self._uuids = {n: d.uuid for d in devices for n in (*d.former_names, d.name)}
            self._marked_locked()
            self._reranked_locked()
            published = self._published_locked()
            started = self._started
        if started:
            log.info(
                "devices changed (MIG layout or GPUs): republishing %d devices", len(published)
            )
            self.publisher.request(published)
        return True

    def on_health(self, transition: HealthTransition) -> tuple[str, ...]:
        """Mark (or unmark) the GPU's devices with its taint and tell the kubelet's health watchers;
        hand the republish to the publisher's thread. Nothing is rebuilt, and the hints that follow
        the GPUs in use are recomputed off this path, by the hint thread, as after a Prepare."""
        index = transition.gpu_index
        with self._lock:
            before = self._taints
            if transition.after is Health.HEALTHY:
                after = {i: t for i, t in before.items() if i != index}
                self._reasons = {i: r for i, r in self._reasons.items() if i != index}
            else:
                taint = taint_for(transition, own_domain=self.own_domain, now_unix_s=time.time())
                held = before.get(index)
                if held is not None and (held.key, held.value) == (taint.key, taint.value):
                    # the same fault told again (a replay): it was added when first seen
                    taint = held
                after = {**before, index: taint}
                self._reasons = {**self._reasons, index: transition.reason}
            changed = before != after
            if changed:
                self._taints = after
                self._marked_locked()
                published = self._published_locked()
                started = self._started
        if changed:
            log.info("GPU %d is %s (%s): republishing", index, transition.after, transition.reason)
            if started:
                self.publisher.request(published)
            self._hints.wake()  # the GPU's hints (in use or not) follow on the hint thread
        return (self.driver_name,)

    def label_options(self, config: Config) -> LabelOptions:
        return LabelOptions(
            mig_strategy=config.flags.mig_strategy, own_domain=config.daemon.own_domain
        )

    def liveness(self) -> EndpointProbeResult:
        """The sockets as served now (ours, at their paths, answering) and the publisher's
        threads."""
        return EndpointProbeResult(*self.plugin.liveness())

    def readiness(self) -> EndpointProbeResult:
        """The helper's readiness; when the API server keeps no taints, ready with a note saying so
        (the pool is published, its sick GPUs left out: nothing an operator must fix for the node to
        serve)."""
        ready, detail = self.plugin.readiness()
        note = self.publisher.taints.note
        return EndpointProbeResult(ready, f"{detail}; {note}" if ready and note else detail)

    def start(self) -> None:
        with self._lock:
            self._started = True
            published = self._published_locked()
        self._hints.start()
        if self.decision.mps is not None:
            self.decision.mps.daemons.start()
        self.plugin.start(published)

    def stop(self, timeout_s: float) -> bool:
        """Sockets (the kubelet deregisters us) and our slices' deletion at once. False if cut
        short."""
        self._hints.stop()
        if self.decision.mps is not None:
            self.decision.mps.daemons.stop()  # the watch only: the daemons serve their shares on
        return self.plugin.stop(timeout_s)
