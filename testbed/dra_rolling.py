"""One node's DRA driver replaced under a steady stream of claim prepares, and what the node published meanwhile.

Two ways, as the DaemonSet does them (docs/upgrade.md):
- today's (`maxSurge: 0`, `socketNames: fixed`): the old instance stops (it deletes the pool's slices, being
  the last), then the new one starts, publishes and registers;
- rolling (`maxSurge: 1, maxUnavailable: 0`, `socketNames: per-instance`): the new instance starts beside the
  old one, which is stopped only once the new one is ready (/readyz: registered and published).
A thread plays the kubelet 1.33+ (DraKubeletStandin.current: the most recently registered instance): it
prepares a 1-GPU claim and unprepares it, one after another, each call sent to the instance current at that
moment, so a claim's Prepare and Unprepare may reach different instances. A second thread records the
number of devices the pool lists after every slice change the API stand-in stores. Shared by
tests/adversarial/dra/test_dra_rolling_update.py and benchmarks/bench_dra_rolling_update.py.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import grpc

from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.dra_node import DRIVER, NODE, Node, eventually
from testbed.plugin_rolling import zero_time

OLD, NEW = "0a0a0a0a-0000-4000-8000-000000000001", "0b0b0b0b-0000-4000-8000-000000000002"
MACHINE = "dgx1-v100"
GPUS = [f"gpu-{i}" for i in range(8)]
SETTLE_CLAIMS = 20  # claims prepared and unprepared after each step before the next, as pods keep coming
WAIT_S = 20.0  # a bound for a loaded machine, not a figure


def launch_instance(node: Node, instance: str) -> NodeRuntime[DraFrontEnd]:
    """One driver pod's daemon on `node`, started: `instance` is its pod UID ("" with fixed names), the socket
    naming comes from the node's config file."""
    config = node.load()
    client = api_client(node.api.host)
    front_end = DraFrontEnd.for_config(config, client, node_name=NODE, backoff_max_s=0.2, instance=instance)
    runtime = NodeRuntime(FakeNvml.from_machine(MACHINE), config, front_end, load_config=node.load)
    runtime.start()
    return runtime


def start_instance(node: Node, kubelet: DraKubeletStandin, instance: str) -> NodeRuntime[DraFrontEnd]:
    """launch_instance, then until it is ready (registered by `kubelet`, its pool published)."""
    runtime = launch_instance(node, instance)
    front_end = runtime.front_end
    if not eventually(lambda: kubelet.current(DRIVER) is not None and front_end.readiness().ok, WAIT_S):
        raise TimeoutError(f"instance {instance or '(fixed names)'} not ready: {front_end.readiness().detail}")
    return runtime


@dataclass
class PoolWatch:
    """The number of devices our pool lists, recorded after every slice change (add, update, delete)."""

    node: Node
    history: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.history.append((time.monotonic(), len(self.node.listed())))
        self._thread = threading.Thread(target=self._run, name="pool-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seen = self.node.api.changes
        while not self._stop.is_set():
            now = self.node.api.wait_for_change(seen, 0.05)
            if now != seen:
                seen = now
                self.history.append((time.monotonic(), len(self.node.listed())))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(WAIT_S)


@dataclass
class Prepares:
    """Claims prepared and unprepared one after another, each call at the instance current then."""

    node: Node
    kubelet: DraKubeletStandin
    prepared: int = 0
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="prepares", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(WAIT_S)

    def wait_prepared(self, more: int) -> None:
        target, deadline = self.prepared + more, time.monotonic() + WAIT_S
        while self.prepared < target:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{more} more prepares not reached; failures: {self.failures[-3:]}")
            time.sleep(0.005)

    def _call(self, what: str, claim: tuple[str, str, str]) -> bool:
        plugin = self.kubelet.current(DRIVER)
        if plugin is None:  # the kubelet fails the call: the driver is not registered
            self.failures.append(f"{what} {claim[2]}: no instance of {DRIVER} registered")
            return False
        try:
            if what == "prepare":
                errors = [e.error for e in self.kubelet.prepare(plugin, [claim]).values() if e.error]  # type: ignore[attr-defined]
            else:
                errors = [e for e in self.kubelet.unprepare(plugin, [claim]).values() if e]
        except grpc.RpcError as error:  # an instance that stopped under the call
            errors = [f"{error.code().name}: {error.details()}"]  # type: ignore[attr-defined]
        self.failures.extend(f"{what} {claim[2]}: {e}"[:200] for e in errors)
        return not errors

    def _run(self) -> None:
        step = 0
        while not self._stop.is_set():
            claim = self.node.claim(f"c{step}", f"uid-{step}", GPUS[step % len(GPUS)])
            if self._call("prepare", claim):
                while not self._call("unprepare", claim) and not self._stop.is_set():
                    time.sleep(0.01)  # as the kubelet retries: the GPU stays held until it succeeds
                self.prepared += 1
            else:
                time.sleep(0.01)
            step += 1


@dataclass(frozen=True)
class Outcome:
    prepared: int
    failures: tuple[str, ...]
    zero_s: float  # how long the pool listed no device after it first listed some
    listed_at_end: int
    slice_deletes: int


def replace_driver(node: Node, *, rolling: bool) -> tuple[Outcome, NodeRuntime[DraFrontEnd]]:
    """The old instance serving, claims coming; then the new one replaces it. Returns the new one, running."""
    names = "per-instance" if rolling else "fixed"
    node.config_file.write_text(f"version: v1\ngpuDevicePlugin:\n  mode: dra\n  socketNames: {names}\n")
    old_id, new_id = (OLD, NEW) if rolling else ("", "")
    kubelet = node.kubelet()
    old = start_instance(node, kubelet, old_id)
    watch, calls = PoolWatch(node), Prepares(node, kubelet)
    watch.start()
    calls.start()
    running = [old]
    try:
        calls.wait_prepared(SETTLE_CLAIMS)
        if rolling:  # maxSurge 1: the new one first, the old one terminated once the new one is ready
            running.append(new := start_instance(node, kubelet, new_id))
            calls.wait_prepared(SETTLE_CLAIMS)
            running.remove(old)
            old.stop()
        else:  # maxSurge 0: the old one terminated, then the new one started
            running.remove(old)
            old.stop()
            running.append(new := start_instance(node, kubelet, new_id))
        calls.wait_prepared(SETTLE_CLAIMS)
        running.remove(new)
    finally:
        calls.stop()
        watch.stop()
        for daemon in running:
            daemon.stop()
    deletes = sum(1 for m, p in node.api.requests if m == "DELETE" and "/resourceslices" in p)
    outcome = Outcome(
        calls.prepared, tuple(calls.failures), zero_time(watch.history, time.monotonic()), len(node.listed()), deletes
    )
    return outcome, new
