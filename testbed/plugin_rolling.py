"""One node's plugin replaced under load: the old daemon (A) and the new one (B) over the kubelet stand-in,
a thread admitting 1-GPU pods one after another, and what the kubelet advertised meanwhile.

Two ways, as the DaemonSet does them (docs/upgrade.md):
- today's (`maxSurge: 0`, fixed socket name): A stops, then B starts and registers;
- rolling (`maxSurge: 1, maxUnavailable: 0`, per-instance names): B starts beside A, A is stopped only
  once B's readiness (/readyz: registered) is green.
Shared by tests/integration/test_rolling_update.py and benchmarks/bench_rolling_update.py. The gap is
read from the stand-in's record of every change of the healthy count, not from the sampling.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from device_plugin.config.loader import load_config
from device_plugin.dp.front_end import DevicePluginFrontEnd, device_plugin_runtime
from device_plugin.dp_helper.lifecycle import LifecycleTiming
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.kubelet_device_plugin import AdmissionRefused, KubeletStandIn
from testbed.timing import FAST_LIFECYCLE

GPU = "nvidia.com/gpu"
WAIT_S = 15.0
POD_A = "0b6c2c4e-5d1f-4a2b-8c3d-00000000000a"
POD_B = "0b6c2c4e-5d1f-4a2b-8c3d-00000000000b"
SETTLE_ADMISSIONS = 20  # admitted after each step before the next, as pods keep arriving


def plugin(
    plugin_dir: Path,
    pod_uid: str,
    socket_names: str,
    machine: str = "dgx1-v100",
    timing: LifecycleTiming = FAST_LIFECYCLE,
) -> NodeRuntime:
    """One plugin pod's daemon (not started): its own fake NVML on the same machine, POD_UID set."""
    env = {"DEVICE_PLUGIN_DIR": str(plugin_dir), "METRICS_ADDRESS": "", "SOCKET_NAMES": socket_names}
    env["POD_UID"] = pod_uid
    config = load_config(env=env)
    return device_plugin_runtime(FakeNvml.from_machine(machine), config, timing=timing, env=env)


def wait_ready(daemon: NodeRuntime[DevicePluginFrontEnd], timeout_s: float = WAIT_S) -> None:
    """Until the daemon's /readyz answer is green (every resource registered), as the DaemonSet waits."""
    deadline = time.monotonic() + timeout_s
    while not (result := daemon.front_end.readiness()).ok:
        if time.monotonic() > deadline:
            raise TimeoutError(f"not ready within {timeout_s} s: {result.detail}")
        time.sleep(0.01)


@dataclass
class Admissions:
    """Admits 1-GPU pods one after another (each released at once), sampling the healthy count."""

    kubelet: KubeletStandIn
    pause_s: float = 0.002  # between pods, so the daemons get the CPU too
    admitted: int = 0
    failures: list[str] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="admissions", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(WAIT_S)

    def wait_admitted(self, more: int, *, or_failures: int | None = None) -> None:
        """Until `more` pods more were admitted (or, when given, `or_failures` more were refused)."""
        target, deadline = self.admitted + more, time.monotonic() + WAIT_S
        refused = len(self.failures) + or_failures if or_failures is not None else None
        while self.admitted < target and (refused is None or len(self.failures) < refused):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{more} more admissions not reached; failures: {self.failures[-3:]}")
            time.sleep(0.005)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                admission = self.kubelet.admit(GPU, 1)
                self.kubelet.release(GPU, admission.preferred)
                self.admitted += 1
            except AdmissionRefused as error:
                self.failures.append(str(error)[:200])
            except grpc.RpcError as error:  # an RPC to a plugin that stopped under it
                self.failures.append(f"{error.code().name}: {error.details()}"[:200])  # type: ignore[attr-defined]
            self.samples.append(self.kubelet.healthy_count(GPU))
            time.sleep(self.pause_s)


@dataclass(frozen=True)
class Outcome:
    admitted: int
    failures: tuple[str, ...]
    zero_s: float  # how long the node advertised no healthy GPU after it first had some (exact, recorded)
    sampled_min: int  # the smallest healthy count the admitting thread saw
    healthy_at_end: int


def zero_time(history: list[tuple[float, int]], end: float) -> float:
    """Seconds with a healthy count of 0 in `history`, from its first non-zero count until `end`."""
    total, zero_since, seen = 0.0, None, False
    for at, count in history:
        if count and zero_since is not None:
            total, zero_since = total + at - zero_since, None
        elif not count and seen and zero_since is None:
            zero_since = at
        seen = seen or count > 0
    return total + (end - zero_since if zero_since is not None else 0.0)


def _outcome(kubelet: KubeletStandIn, traffic: Admissions) -> Outcome:
    end = time.monotonic()
    zero_s = zero_time(kubelet.healthy_history(GPU), end)
    sampled = min(traffic.samples, default=0)
    return Outcome(traffic.admitted, tuple(traffic.failures), zero_s, sampled, kubelet.healthy_count(GPU))


def replace_plugin(
    kubelet: KubeletStandIn, plugin_dir: Path, *, rolling: bool, names: tuple[str, str] | None = None
) -> tuple[Outcome, NodeRuntime]:
    """A serving, pods arriving; then B replaces A, rolling or today's way. Returns B, still running.

    `names`: A's and B's socketNames; by default per-instance for a rolling update, else fixed."""
    old_names, new_names = names or (("per-instance",) * 2 if rolling else ("fixed",) * 2)
    old = plugin(plugin_dir, POD_A, old_names)
    old.start()
    wait_ready(old)
    kubelet.wait_for(lambda: kubelet.healthy_count(GPU) or None, WAIT_S)
    traffic = Admissions(kubelet)
    traffic.start()
    new = plugin(plugin_dir, POD_B, new_names)
    running = [old]  # stopped at the end if still running; B too when the replacement failed
    try:
        traffic.wait_admitted(SETTLE_ADMISSIONS)
        if rolling:  # maxSurge 1: B first, A terminated once B is Ready
            running.append(new)
            new.start()
            wait_ready(new)
            traffic.wait_admitted(SETTLE_ADMISSIONS)
            running.remove(old)
            old.stop()
        else:  # maxSurge 0: A terminated, then B started
            running.remove(old)
            old.stop()
            running.append(new)
            new.start()
            wait_ready(new)
        # Pods keep coming after A left; a node left with no GPU (an old kubelet) refuses them instead.
        traffic.wait_admitted(SETTLE_ADMISSIONS, or_failures=SETTLE_ADMISSIONS)
        running.remove(new)
    finally:
        traffic.stop()
        for daemon in running:
            daemon.stop()
    return _outcome(kubelet, traffic), new
