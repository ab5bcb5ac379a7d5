"""Rolling-update chaos for the DRA driver: two or three instances on one kubelet directory, a stream of
claim calls, and instances killed (SIGKILL or SIGTERM) and restarted at random moments (issue 42).

Each instance is a `gpu-device-plugin run --mode dra` process (socketNames: per-instance) on a simulated
dgx1-v100, against the API-server stand-in in this process; the DRA kubelet stand-in registers them and
the calls go over their real sockets. One seeded random stream of steps:
- prepare: a claim allocated a free GPU (in the API), prepared at the kubelet's current instance;
- batch: three such claims in one call;
- conflict: two claims allocated one free GPU (a pair the scheduler never makes; it tests exclusivity),
  prepared at the same moment at two instances: at most one may be confirmed;
- unprepare: a confirmed claim released at some live instance (its pod gone), then deleted from the API;
- retry: a claim whose call was lost (the instance died) sent again, as the kubelet does: its Prepare again
  while its pod lives, or its Unprepare once the pod is gone (the kubelet tracks a claim before the call);
and every 2-8 s (drawn from the seed too) a kill: an instance killed (SIGKILL or SIGTERM, never the last
one serving) and started again with the same pod UID (a container restart) or a new one (a new pod).
After each restart, once the new instance answers, the invariants are checked on a consistent read (the
checkpoint loaded under the lock both instances take for a change) and through every live instance:
no device confirmed to two claims; every confirmed prepare checkpointed, and refused to a rival by every
live instance; no confirmed unprepare in the checkpoint; no claim checkpointed that nothing confirmed and
no lost call may still confirm (a ghost holder); no slice deleted while an instance serves.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.service.instance_lock import CALL_LOCK
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from device_plugin.serving.socket_files import served_by_someone
from device_plugin.standins.api_objects import allocated_claim
from device_plugin.standins.api_server import ApiStandin
from device_plugin.standins.kubelet_dra import DraKubeletStandin, Registered

DRIVER, NODE, MACHINE = "gpu.gpu-device-plugin.io", "chaos-node", "dgx1-v100"
GPUS = tuple(f"gpu-{i}" for i in range(8))
CLI = Path(sys.executable).parent / "gpu-device-plugin"
STEPS = ("prepare", "prepare", "batch", "conflict", "unprepare", "unprepare", "unprepare", "retry")
LOG_LEVEL = os.environ.get("CHAOS_LOG_LEVEL", "WARNING")  # INFO to read what each instance did
KILL_EVERY_S = (2.0, 8.0)  # the time between two kills, drawn uniformly: 6-20 kills a minute, as the round found


@dataclass
class Report:
    seed: int
    instances: int
    prepares_confirmed: int = 0
    unprepares_confirmed: int = 0
    kills: int = 0
    checks: int = 0
    lost: list[str] = field(default_factory=list)  # confirmed prepares missing from the checkpoint
    back: list[str] = field(default_factory=list)  # confirmed unprepares found in the checkpoint again
    ghosts: list[str] = field(default_factory=list)  # claims checkpointed that nothing confirmed or may confirm
    doubled: list[str] = field(default_factory=list)  # a device confirmed to two claims at once
    rivals_accepted: list[str] = field(default_factory=list)  # a live instance accepted a rival of a confirmed claim
    slices_deleted: int = 0

    @property
    def violations(self) -> int:
        return (
            len(self.lost)
            + len(self.back)
            + len(self.ghosts)
            + len(self.doubled)
            + len(self.rivals_accepted)
            + (self.slices_deleted)
        )


@dataclass
class Instance:
    uid: str
    process: subprocess.Popen[bytes]
    paths: SocketPaths

    def alive(self) -> bool:
        return self.process.poll() is None


class Chaos:
    def __init__(self, seed: int, instances: int, root: Path) -> None:
        self.rng = random.Random(seed)
        self.report = Report(seed, instances)
        self.root = root
        self.count = instances
        self.api = ApiStandin().up()
        self.api.add_node(NODE)
        self.kubeconfig = root / "kubeconfig"
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": self.api.host}}],
            "users": [{"name": "u", "user": {}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        }))  # fmt: skip
        self.kubelet = DraKubeletStandin(root / "plugins_registry")
        self.live: list[Instance] = []
        self.serial = 0
        self.confirmed: dict[str, str] = {}  # claim uid -> the GPU its confirmed Prepare holds
        self.released: set[str] = set()  # claim uids whose Unprepare was confirmed (and not prepared since)
        self.pending: dict[str, str] = {}  # uid -> "prepare" | "unprepare": a call whose answer was lost
        self.refs: dict[str, tuple[str, str, str]] = {}  # uid -> (namespace, uid, name)
        self.gpu_of: dict[str, str] = {}  # uid -> the GPU the API allocates it

    # ---- instances --------------------------------------------------------------------------------

    def start(self, pod_uid: str | None = None) -> Instance:
        pod_uid = pod_uid or str(uuid.uuid4())
        env = {
            **os.environ, "NODE_NAME": NODE, "POD_UID": pod_uid, "SOCKET_NAMES": "per-instance",
            "KUBECONFIG": str(self.kubeconfig), "DEVICE_PLUGIN_DIR": str(self.root / "device-plugins"),
            "METRICS_ADDRESS": "",
        }  # fmt: skip
        log = (self.root / f"instance-{pod_uid[:8]}.log").open("ab")
        process = subprocess.Popen(
            [str(CLI), "run", "--machine", MACHINE, "--mode", "dra", "--log-level", LOG_LEVEL],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        instance = Instance(pod_uid, process, SocketPaths.for_driver(DRIVER, self.root, pod_uid))
        self.live.append(instance)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # its own registration served: the kubelet may send it calls now
            if served_by_someone(instance.paths.registration) and self._answers(instance):
                self.kubelet.current(DRIVER)  # the plugin watcher registers it
                return instance
            time.sleep(0.05)
        raise TimeoutError(f"instance {pod_uid} did not serve: see {log.name}")

    def _answers(self, instance: Instance) -> bool:
        try:
            self.kubelet.unprepare(self._at(instance), [])
            return True
        except grpc.RpcError:
            return False

    def _at(self, instance: Instance) -> Registered:
        return Registered(DRIVER, str(instance.paths.endpoint), "v1.DRAPlugin")

    def kill(self) -> None:
        alive = [i for i in self.live if i.alive()]
        if len(alive) < 2:
            return  # never the last one serving: "no slice deleted while an instance serves" stays clean
        victim = self.rng.choice(alive)
        victim.process.send_signal(self.rng.choice((signal.SIGKILL, signal.SIGTERM)))
        victim.process.wait(timeout=30)
        self.live.remove(victim)
        self.report.kills += 1
        self.start(victim.uid if self.rng.random() < 0.5 else None)  # a container restart, or a new pod
        self.check()

    def stop(self) -> None:
        for instance in self.live:
            if instance.alive():
                instance.process.send_signal(signal.SIGKILL)
                instance.process.wait(timeout=30)
        self.api.down()

    # ---- claims -----------------------------------------------------------------------------------

    def _new_claim(self, gpu: str) -> tuple[str, str, str]:
        self.serial += 1
        uid, name = f"u{self.serial}", f"c{self.serial}"
        result = {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": gpu}
        self.api.claims[("ns", name)] = allocated_claim("ns", name, uid, [result])
        self.refs[uid] = ("ns", uid, name)
        self.gpu_of[uid] = gpu
        return self.refs[uid]

    def _forget(self, uid: str) -> None:
        """The claim's pod is gone and the scheduler deallocated it: the API no longer has it."""
        self.api.claims.pop(("ns", self.refs[uid][2]), None)

    def _free_gpus(self) -> list[str]:
        allocated = {self.gpu_of[u] for u in self.refs if ("ns", self.refs[u][2]) in self.api.claims}
        return [g for g in GPUS if g not in allocated]

    def _current(self) -> Instance:
        current = self.kubelet.current(DRIVER)
        return next((i for i in self.live if current and str(i.paths.endpoint) == current.endpoint), self.live[-1])

    def _prepare(self, instance: Instance, refs: list[tuple[str, str, str]]) -> None:
        try:
            answers = self.kubelet.prepare(self._at(instance), refs)
        except (grpc.RpcError, AssertionError):
            for _, uid, _ in refs:
                self.pending[uid] = "prepare"
            return
        for _, uid, _ in refs:
            answer: Any = answers[uid]
            if answer.error:
                self.pending.pop(uid, None)
                self._forget(uid)  # refused: its pod fails; the scheduler frees the GPU
            else:
                self._confirm(uid)

    def _confirm(self, uid: str) -> None:
        gpu = self.gpu_of[uid]
        holder = next((u for u, g in self.confirmed.items() if g == gpu and u != uid), None)
        if holder is not None:
            self.report.doubled.append(f"{gpu}: {holder} and {uid}")
        self.pending.pop(uid, None)
        self.released.discard(uid)
        self.confirmed[uid] = gpu
        self.report.prepares_confirmed += 1

    def _unprepare(self, instance: Instance, uid: str) -> None:
        try:
            error = self.kubelet.unprepare(self._at(instance), [self.refs[uid]])[uid]
        except grpc.RpcError:
            self.pending[uid] = "unprepare"
            return
        if error:
            self.pending[uid] = "unprepare"
            return
        self.pending.pop(uid, None)
        self.confirmed.pop(uid, None)
        self.released.add(uid)
        self.report.unprepares_confirmed += 1
        self._forget(uid)

    def step(self) -> None:
        kind = self.rng.choice(STEPS)
        free = self._free_gpus()
        if kind == "prepare" and free:
            self._prepare(self._current(), [self._new_claim(self.rng.choice(free))])
        elif kind == "batch" and len(free) >= 3:
            self._prepare(self._current(), [self._new_claim(g) for g in self.rng.sample(free, 3)])
        elif kind == "conflict" and free and len([i for i in self.live if i.alive()]) >= 2:
            gpu = self.rng.choice(free)
            pair = [self._new_claim(gpu), self._new_claim(gpu)]
            a, b = self.rng.sample([i for i in self.live if i.alive()], 2)
            calls = zip((a, b), pair, strict=True)
            threads = [threading.Thread(target=self._prepare, args=(at, [ref])) for at, ref in calls]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        elif kind == "unprepare" and self.confirmed:
            uid = self.rng.choice(sorted(self.confirmed))
            self._unprepare(self.rng.choice([i for i in self.live if i.alive()]), uid)
        elif kind == "retry" and self.pending:
            uid = self.rng.choice(sorted(self.pending))
            if (
                self.pending[uid] == "prepare"
                and self.rng.random() < 0.5
                and ("ns", self.refs[uid][2]) in self.api.claims
            ):
                self._prepare(self._current(), [self.refs[uid]])
            else:
                self._unprepare(self._current(), uid)  # its pod went: the kubelet unprepares what it tracked

    # ---- the invariants ---------------------------------------------------------------------------

    def check(self) -> None:
        """A consistent read of the checkpoint (under the lock both instances take), and each live instance
        asked to prepare a rival of a confirmed claim."""
        self.report.checks += 1
        folder = self.root / "plugins" / DRIVER
        fd = os.open(folder / CALL_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            checkpoint = Checkpoint(folder / "checkpoint.json", shared=True)
            checkpoint.open()
            held = {uid: checkpoint.get(uid) for uid in checkpoint.uids()}
        finally:
            os.close(fd)
        for uid, gpu in self.confirmed.items():
            claim = held.get(uid)
            if claim is None or gpu not in [d.device_name for d in claim.devices]:
                self.report.lost.append(f"{uid} on {gpu}")
        for uid in held:
            if uid in self.released and uid not in self.pending:
                self.report.back.append(uid)
            elif uid not in self.confirmed and uid not in self.pending and uid not in self.released:
                self.report.ghosts.append(uid)
        for uid, gpu in list(self.confirmed.items())[:2]:
            rival = self._new_claim(gpu)
            for instance in [i for i in self.live if i.alive()]:
                try:
                    answer: Any = self.kubelet.prepare(self._at(instance), [rival])[rival[1]]
                except (grpc.RpcError, AssertionError):
                    continue
                if not answer.error:
                    self.report.rivals_accepted.append(f"{rival[1]} on {gpu} of {uid}")
                    self.kubelet.unprepare(self._at(instance), [rival])
            self._forget(rival[1])
        self.report.slices_deleted = sum(
            1 for method, path, _ in self.api.answered if method == "DELETE" and "/resourceslices" in path
        )


def run(seed: int, seconds: float, instances: int = 2) -> Report:
    """One seeded run: `instances` serving, steps for `seconds`, then a last check."""
    root = Path(tempfile.mkdtemp(prefix="chaos-", dir="/tmp"))  # short: unix socket paths
    chaos = Chaos(seed, instances, root)
    try:
        for _ in range(instances):
            chaos.start()
        deadline = time.monotonic() + seconds
        next_kill = time.monotonic() + chaos.rng.uniform(*KILL_EVERY_S)
        while time.monotonic() < deadline:
            chaos.step()
            if time.monotonic() >= next_kill:
                chaos.kill()
                next_kill = time.monotonic() + chaos.rng.uniform(*KILL_EVERY_S)
        chaos.check()
        return chaos.report
    finally:
        chaos.stop()
        shutil.rmtree(root, ignore_errors=True)
