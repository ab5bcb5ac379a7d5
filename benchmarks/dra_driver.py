"""The running DRA driver the benchmarks measure, and the ways they drive and watch it.

Used by bench_dra.py (a, b, d), bench_checkpoint.py, bench_node_runtime.py and bench_dra_slow_api.py: the
node runtime with the DRA front-end, as `run --mode dra` builds it (no metrics endpoint), against the
Kubernetes API stand-in (testbed/api_standin.py, read by the real `kubernetes` client); NodePrepareResources
rounds through the DRA kubelet stand-in (gRPC over a unix socket); the device names of our published pool;
a wait until a condition holds, woken by each change the stand-in stores. Boundary: no figures and no
targets here, the scripts print those.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import _common  # noqa: F401  (puts the checkout on sys.path for the package imports below)
from _common import percentile

from device_plugin.config.model import Config
from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.config.share_settings import ISOLATION_PER_PROCESS, ShareSettings
from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.process.gc_pauses import freeze_start_up_objects
from device_plugin.standins.api_objects import allocated_claim
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.api_standin import ApiStandin
from testbed.scheduler_view import schedulable

DRIVER, NODE = DEFAULT_DRA_DRIVER_NAME, "bench-node"


class Driver:
    """The node runtime with the DRA front-end, as `run --mode dra` builds it (no metrics endpoint)."""

    def __init__(
        self, root: Path, api: ApiStandin, fake: FakeNvml, *, memory_shares: bool = False, mps_program: str = ""
    ) -> None:
        config = Config()
        health = replace(config.daemon.health, quiet_period_s=0.2, probe_interval_s=0.05)
        daemon = replace(
            config.daemon, device_plugin_dir=root / "dp", health=health, metrics_address="", memory_shares=memory_shares
        )
        if mps_program:  # per-process isolation, the daemons' and specs' folders under `root`
            shares = ShareSettings(
                isolation=ISOLATION_PER_PROCESS, mps_control=mps_program, cdi_spec_dir=str(root / "cdi")
            )
            daemon = replace(daemon, shares=shares)
            config = replace(config, flags=replace(config.flags, mps_root=str(root / "mps")))
        config = replace(config, daemon=daemon)
        self.front_end = DraFrontEnd.for_config(config, api_client(api.host), node_name=NODE)
        self.runtime = NodeRuntime(fake, config, self.front_end)
        self.runtime.start()
        self.front_end.publisher.wait_synced(30.0)
        freeze_start_up_objects()  # as `run` does once it serves: full collections do not walk the start-up heap

    def stop(self) -> None:
        self.runtime.stop()


def running_driver(
    root: Path, api: ApiStandin, fake: FakeNvml, *, memory_shares: bool = False, mps_program: str = ""
) -> Driver:
    return Driver(root, api, fake, memory_shares=memory_shares, mps_program=mps_program)


@dataclass(frozen=True)
class DriverRun:
    """One benchmark's driver and what it runs against; `root` holds its sockets."""

    root: Path
    api: ApiStandin
    fake: FakeNvml
    driver: Driver


@contextmanager
def driver_on(
    machine: str, *, schema_check: bool = True, memory_shares: bool = False, mps_program: str = ""
) -> Iterator[DriverRun]:
    """A driver on the named simulated machine, with its API stand-in (checking every write against the
    schema unless `schema_check` is False); stopped and removed afterwards. `mps_program`: shares get
    per-process isolation, run by that MPS control program."""
    root = Path(tempfile.mkdtemp(prefix="bdra-", dir="/tmp"))
    api = ApiStandin().up()
    api.schema_check = schema_check
    api.add_node(NODE)
    fake = FakeNvml.from_machine(machine)
    try:
        driver = running_driver(root, api, fake, memory_shares=memory_shares, mps_program=mps_program)
        try:
            yield DriverRun(root, api, fake, driver)
        finally:
            driver.stop()
    finally:
        api.down()
        shutil.rmtree(root, ignore_errors=True)


def pool_names(api: ApiStandin) -> set[str]:
    """The device names the scheduler can allocate from our node's pool as the API stand-in holds it now
    (a device an unhealthy GPU's taint blocks is listed, but not among them)."""
    return set(schedulable(api.pool(DRIVER, NODE)))


def until_pool_ms(api: ApiStandin, check: Callable[[], bool], timeout_s: float = 10.0) -> float:
    """Milliseconds until `check` holds, looked at once per change the API stand-in stores (no polling: a
    poll loop in this process would take the interpreter from the driver it measures), or about `timeout_s`."""
    started = time.perf_counter()
    seen = api.changes  # before the check: a change between the two wakes the wait at once
    while not check():
        left_s = timeout_s - (time.perf_counter() - started)
        if left_s <= 0:
            break
        seen = api.wait_for_change(seen, left_s)
    return (time.perf_counter() - started) * 1000


def prepare_samples(
    api: ApiStandin,
    kubelet: DraKubeletStandin,
    plugin: object,
    serial: Iterator[int],
    per_call: int,
    rounds: int,
    share_gib: int = 0,
) -> tuple[list[float], int]:
    """NodePrepareResources round trips (ms) of `rounds` calls of `per_call` claims on gpu-0.., and the errors;
    `share_gib`: each claim is a share of that much of its GPU (a node with memoryShares on)."""
    samples, errors = [], 0
    for _ in range(rounds):
        claims = []
        for k in range(per_call):
            n = next(serial)
            result = {"request": "gpus", "driver": DRIVER, "pool": NODE, "device": f"gpu-{k}"}
            if share_gib:
                result.update(shareID=f"share-{n}", consumedCapacity={"memory": f"{share_gib}Gi"})
            api.claims[("ns", f"c{n}")] = allocated_claim("ns", f"c{n}", f"u{n}", [result])
            claims.append(("ns", f"u{n}", f"c{n}"))
        started = time.perf_counter()
        answers = kubelet.prepare(plugin, claims)  # type: ignore[arg-type]
        samples.append((time.perf_counter() - started) * 1000)
        errors += sum(1 for a in answers.values() if a.error)  # type: ignore[attr-defined]
        kubelet.unprepare(plugin, claims)  # type: ignore[arg-type]
    return samples, errors


def share_prepare_rows(rounds: int) -> list[list[str]]:
    """A share's Prepare (memoryShares on), alone on its GPU and beside three shares held on it."""
    rows = []
    with driver_on("dgx1-v100", memory_shares=True) as run:
        kubelet = DraKubeletStandin(run.root / "plugins_registry")
        plugin = kubelet.wait_for_plugin()
        serial = itertools.count()
        for others in (0, 3):
            held = []
            for n in range(others):
                result = {"request": "g", "driver": DRIVER, "pool": NODE, "device": "gpu-0", "shareID": f"held-{n}",
                          "consumedCapacity": {"memory": "4Gi"}}  # fmt: skip
                run.api.claims[("ns", f"h{n}")] = allocated_claim("ns", f"h{n}", f"held-{n}", [result])
                held.append(("ns", f"held-{n}", f"h{n}"))
            assert all(not a.error for a in kubelet.prepare(plugin, held).values())  # type: ignore[attr-defined]
            samples, errors = prepare_samples(run.api, kubelet, plugin, serial, 1, rounds, share_gib=4)
            p99 = percentile(samples, 99)
            verdict = "met" if p99 < 50 else "missed"
            where = f"1 share, {others} others on its GPU"
            rows.append([where, f"{percentile(samples, 50):.1f}", f"{p99:.1f}", f"{verdict} (< 50 ms)", str(errors)])
            kubelet.unprepare(plugin, held)
    return rows
