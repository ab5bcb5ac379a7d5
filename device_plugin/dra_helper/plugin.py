"""The helper as one object behind one options struct: what a DRA driver starts, probes and stops.

Boundary: builds and wires the generic parts (the SlicePublisher, the claim fetcher, the Preparer
over the checkpoint, the registration and DRA gRPC servers, the devices' health feed) for one driver
on one node; the driver hands it its Driver (dra_helper/driver.py) and, whenever they change, the
devices to publish (`publisher.request`) and their health (`health.set`). Probes answer (ok,
detail); what a probe result is to the HTTP endpoint is the caller's. The checkpoint is
`<kubelet>/plugins/<driver>/`, beside the DRA socket, read by the server once it holds the instance
lock and the endpoint (never at construction). Only then does the publisher start (an instance that
waits for another never writes the pool) and are the checkpointed claims the API server says are no
longer ours unprepared (claims/cleanup.py), before the kubelet is sent to us. A kubelet
(re)registration asks the publisher to reconcile (it may have wiped our slices).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client as k8s

from device_plugin.dra_helper.api.devices import SliceDevice
from device_plugin.dra_helper.api.kube import NodeFacts
from device_plugin.dra_helper.api.publisher import SlicePublisher
from device_plugin.dra_helper.api.transport import ApiTransport
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.claims.api_read import ApiClaimFetcher
from device_plugin.dra_helper.claims.cleanup import BUDGET_S, clean_up
from device_plugin.dra_helper.claims.prepare import Preparer
from device_plugin.dra_helper.claims.restore import LIST_TIMEOUT_S, restore
from device_plugin.dra_helper.driver import Driver
from device_plugin.dra_helper.runtime_cdi import (
    DROPPED,
    NEEDS_CONFIG,
    SUPPORTED,
    CdiVerdict,
    cdi_verdict,
)
from device_plugin.dra_helper.service.device_health import DeviceHealthFeed
from device_plugin.dra_helper.service.grpc_service import DraGrpcServer
from device_plugin.dra_helper.service.health_service import HEARTBEAT_S
from device_plugin.dra_helper.service.instance_lock import CALL_LOCK, CallLock
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from device_plugin.serving import event_loop

log = logging.getLogger(__name__)

CLEAN_UP_SLACK_S = 1.0  # waited past the clean-up's own budget


@dataclass(frozen=True)
class PluginOptions:
    driver_name: str
    node_name: str  # also the pool's name
    # plugins_registry/ (registration) and plugins/<driver>/ (DRA socket, checkpoint)
    kubelet_dir: Path
    backoff_max_s: float = 5.0  # the publisher's retries
    health_heartbeat_s: float = HEARTBEAT_S  # DRAResourceHealth streams resend this often
    # the pod UID: rolling-update mode (per-instance sockets, kubelet 1.33+); "" fixed names
    instance: str = ""


class DraHelper:
    def __init__(self, client: k8s.ApiClient, options: PluginOptions, driver: Driver) -> None:
        name = options.driver_name
        self.health = DeviceHealthFeed(options.node_name)
        # one connection pool for the slices and the claim reads
        self._transport = ApiTransport(client)
        self.publisher = SlicePublisher(
            self._transport,
            driver_name=name,
            node_name=options.node_name,
            backoff_max_s=options.backoff_max_s,
            owner=self._owns_pool,
            catch_up=self._catch_up,
            on_node=self._node_read,
        )
        # what the Node's container runtime does with CDI devices, once read
        self.cdi: CdiVerdict | None = None
        self._claims = ApiClaimFetcher(self._transport, lambda: self.publisher.api_version)
        self._instance = options.instance
        folder = options.kubelet_dir / "plugins" / name
        # Read only once the sockets are ours (the server's keeper opens it): another live driver's
        # folder is never read, migrated or compacted. Rolling-update mode: shared with the other
        # instance.
        checkpoint = Checkpoint(
            folder / "checkpoint.json", deferred=True, shared=bool(options.instance)
        )
        self._checkpoint = checkpoint
        self._driver_name = name
        self._node_name = options.node_name  # also the pool's name
        calls = None
        if options.instance:
            calls = CallLock(
                folder / CALL_LOCK,
                reload=lambda: self.preparer.reload(),
                rounds=lambda: checkpoint.rounds,
            )
        self._calls = calls
        self.preparer = Preparer(
            driver_name=name,
            fetcher=self._claims,
            driver=driver,
            checkpoint=checkpoint,
            serialized=calls.held if calls is not None else nullcontext,
        )
        self.server = DraGrpcServer(
            name,
            SocketPaths.for_driver(name, options.kubelet_dir, options.instance),
            self.preparer,
            on_registered=self.publisher.resync,
            health=self.health,
            health_heartbeat_s=options.health_heartbeat_s,
            calls=calls,
            on_open=self._opened,
        )

    def liveness(self) -> tuple[bool, str]:
        """The sockets as served now (ours, at their paths, answering) and the publisher's
        threads."""
        # waiting is right and a restart would not help: /readyz is red
        if taken := self.server.socket_taken():
            return True, taken
        serving, detail = self.server.serving()
        if not serving:
            return False, detail
        if not self.publisher.running():
            return False, f"the slice publisher stopped: {self.publisher.error}"
        return True, detail

    def readiness(self) -> tuple[bool, str]:
        # why we wait: another instance's lock, or our paths taken
        if taken := self.server.socket_taken():
            return False, taken
        serving, detail = self.server.serving()
        if not serving:
            return False, detail
        status = self.server.registration.status
        # the kubelet's plugin watcher has not called GetInfo/NotifyRegistrationStatus yet
        if status is None:
            return False, "not registered with the kubelet yet"
        if not status[0]:
            return False, f"the kubelet refused the registration: {status[1] or 'no reason given'}"
        # the other's writes are none of our readiness
        if self._instance and not self.publisher.owns_pool:
            return (
                True,
                f"registered; another instance of this driver publishes the pool{self._cdi_note()}",
            )
        # Ready once the pool was published: a republish on its way (a health change, the one-GPU
        # ranks after a Prepare) leaves the node serving, and an API server that refuses it shows as
        # the error.
        if self.publisher.error or not self.publisher.published_once():
            return False, f"ResourceSlices not published yet {self.publisher.error}".strip()
        return True, f"registered; pool generation {self.publisher.generation}{self._cdi_note()}"

    def start(self, devices: Sequence[SliceDevice]) -> None:
        """Serve the sockets; `devices` are published once they are ours, before the kubelet is sent
        to us."""
        self.publisher.request(devices)
        self.server.start()

    def _opened(self) -> None:
        """The sockets and the checkpoint are ours: publish, restore what the checkpoint set aside
        and the API server says we hold, and forget the claims no longer this node's."""
        self.publisher.start()
        if self._checkpoint.damaged:
            event_loop.run(
                restore(
                    self.preparer, self._transport, lambda: self.publisher.api_version,
                    self._driver_name,
                    self._node_name, set(self._checkpoint.uids()),
                ),
                timeout_s=LIST_TIMEOUT_S + CLEAN_UP_SLACK_S,
            )  # fmt: skip
        if not self._checkpoint.uids():
            return
        outcome = event_loop.run(
            clean_up(self.preparer, self._checkpoint, self._claims, self._driver_name, BUDGET_S),
            timeout_s=BUDGET_S + CLEAN_UP_SLACK_S,
        )
        log.info(
            "DRA clean-up of the checkpoint: %d claims unprepared, %d kept on doubt, %d failed to "
            "unprepare",
            len(outcome.dropped),
            len(outcome.kept),
            len(outcome.failed),
        )

    def stop(self, timeout_s: float) -> bool:
        """Sockets (the kubelet deregisters us) and our slices' deletion at once. False if cut
        short.

        The deletes may hang on an unresponsive API server: they run on their own thread and get
        what is left of the budget; the sockets are removed meanwhile whatever the API server
        does."""
        deadline = time.monotonic() + timeout_s
        unpublished: list[bool] = []
        unpublish = not self._replaced()
        unpublishing = threading.Thread(
            target=lambda: unpublished.append(
                self.publisher.stop(max(0.5, timeout_s - 0.1), unpublish=unpublish)
            ),
            name="dra-unpublish",
            daemon=True,
        )
        unpublishing.start()
        self.server.stop(0.5)
        if not self._checkpoint.settle(max(0.1, deadline - time.monotonic())):
            log.warning(
                "the checkpoint's compaction outlasted %.1f s; the next start finishes it",
                timeout_s,
            )
        unpublishing.join(timeout=max(0.1, deadline - time.monotonic()))
        self._close_connections()  # after the deletes: they travel on the same connections
        if unpublishing.is_alive():
            log.warning(
                "deleting our ResourceSlices did not finish within %.1f s; stopping without it",
                timeout_s,
            )
            return False
        return unpublished == [True]

    def _node_read(self, facts: NodeFacts) -> None:
        """Say once, loudly, when the node's runtime will drop the CDI devices every Prepare answers
        with."""
        verdict = cdi_verdict(facts.container_runtime)
        self.cdi = verdict
        if verdict.cdi == DROPPED:
            log.error("CDI devices will not reach containers on this node: %s", verdict.detail)
        elif verdict.cdi == NEEDS_CONFIG:
            log.warning("CDI devices may not reach containers on this node: %s", verdict.detail)
        elif verdict.cdi != SUPPORTED:
            log.info("container runtime: %s", verdict.detail)

    def _cdi_note(self) -> str:
        """Ready either way (the sockets serve, the pool is published), but /readyz says what the
        runtime drops."""
        verdict = self.cdi
        return (
            f"; WARNING: {verdict.detail}"
            if verdict is not None and verdict.cdi in (DROPPED, NEEDS_CONFIG)
            else ""
        )

    def _owns_pool(self) -> bool:
        """Whether this instance writes the pool now: always with fixed names; in rolling-update
        mode only while its registration socket is the newest served (the kubelet's current
        registration)."""
        if not self._instance:
            return True
        return self.server.paths.newest_served(self._driver_name) == self.server.paths.registration

    def _catch_up(self) -> None:
        """While we publish: the other instance's claim changes, read before the hints are computed
        from them."""
        if self._calls is not None and self.server.opened():
            self._calls.catch_up()

    def _replaced(self) -> bool:
        """Rolling-update mode: another instance of this driver serves its registration socket now
        (a rolling replacement), so it takes the pool over and our slices stay. Fixed names:
        never."""
        if not self._instance:
            return False
        others = self.server.paths.others_served(self.server.driver_name)
        if others:
            log.info("%s serves beside us: leaving the ResourceSlices to it", others[0].name)
        return bool(others)

    def _close_connections(self) -> None:
        """The API server connections, closed on the loop they were made on (after the server
        stopped)."""
        try:
            self._transport.shut()
        except Exception:  # a stop goes on whatever the connections do
            log.warning("closing the API server connections failed", exc_info=True)
