"""The hints that follow use, on N hand-made nodes: one driver's republishing per node, for bench_scheduler_cost.

A real node's driver republishes its pool when the GPUs its claims hold change (dra/front_end.py: the
occupancy overrides of dra/occupancy.py). The benchmark's nodes have no driver, so this thread stands in for
all of them, with the product's own computation: it lists the claims every POLL_S, and for each node whose
held GPUs changed it writes that node's slice again with the hints for those GPUs. It counts the writes and
the claim changes it saw (a claim allocated, or gone), so the benchmark can report writes per claim change,
and the writes made while nothing changed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.occupancy import is_whole_gpu, occupancy_overrides, with_values
from device_plugin.dra_helper.api.slices import build_slices
from device_plugin.gpu_sets import Allocator
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from testbed.realnode.rest import Rest

POLL_S = 0.05
RESOURCE = "/apis/resource.k8s.io/v1"


class HintRepublisher(threading.Thread):
    def __init__(self, rest: Rest, machine: str, driver: str, namespace: str, devices: tuple[Any, ...]) -> None:
        super().__init__(name="hint-republisher", daemon=True)
        fake = FakeNvml.from_machine(machine)
        self._allocator = Allocator(build_topology(fake))
        self._rest, self._driver, self._namespace, self._devices = rest, driver, namespace, devices
        self._index = {d.name: d.gpu_index for d in devices}
        self._whole = [(d.gpu_index, d.attributes) for d in devices if is_whole_gpu(d.attributes)]
        self._held: dict[str, frozenset[int]] = {}  # node -> GPU indices its claims hold, as last published
        self._claims: dict[str, tuple[str, frozenset[str]]] = {}  # claim uid -> (node, devices)
        self._stopping = threading.Event()
        self.writes = 0
        self.claim_changes = 0

    def settle(self, quiet_s: float = 1.0, timeout_s: float = 60.0) -> int:
        """Wait until no write came for `quiet_s` (the republishing caught up); the writes by then."""
        deadline = time.monotonic() + timeout_s
        last, since = self.writes, time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(POLL_S)
            if self.writes != last:
                last, since = self.writes, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                break
        return last

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=10)

    def run(self) -> None:
        while not self._stopping.wait(POLL_S):
            try:
                listed = self._rest.call("GET", f"{RESOURCE}/namespaces/{self._namespace}/resourceclaims")["items"]
            except Exception:  # the API server busy: the next poll sees the same changes
                continue
            claims = {c["metadata"]["uid"]: placed for c in listed if (placed := self._placed(c))}
            self.claim_changes += len(claims.keys() ^ self._claims.keys())
            self._claims = claims
            held: dict[str, set[int]] = {}
            for node, names in claims.values():
                held.setdefault(node, set()).update(self._index[n] for n in names)
            for node in set(held) | set(self._held):
                now = frozenset(held.get(node, ()))
                if now != self._held.get(node, frozenset()):
                    self._republish(node, now)
                    self._held[node] = now

    def _placed(self, claim: dict[str, Any]) -> tuple[str, frozenset[str]] | None:
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            return None
        results = [r for r in allocation["devices"]["results"] if r["driver"] == self._driver]
        return (results[0]["pool"], frozenset(r["device"] for r in results)) if results else None

    def _republish(self, node: str, held: frozenset[int]) -> None:
        overrides = occupancy_overrides(self._allocator, self._whole, held, OWN_DOMAIN)
        devices = [
            replace(d, attributes=with_values(d.attributes, overrides[d.gpu_index]))
            if d.gpu_index in overrides and is_whole_gpu(d.attributes)
            else d
            for d in self._devices
        ]
        (body,) = build_slices(devices, node_name=node, driver_name=self._driver, generation=1)
        name = body["metadata"]["name"]
        current = self._rest.call("GET", f"{RESOURCE}/resourceslices/{name}")
        current["spec"] = body["spec"]
        self._rest.call("PUT", f"{RESOURCE}/resourceslices/{name}", current)
        self.writes += 1
