"""Shared pieces for the health tests: a manual clock, fast configs and ResourceManagers over named machines;
for the HealthWatcher tests (tests/health/test_watcher_*.py), starting a watcher over them and backends that
break or count their probes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest

from device_plugin.allocation.resources import ResourceManager
from device_plugin.config.health import HealthConfig
from device_plugin.core.devices import Device, DeviceListSnapshot
from device_plugin.core.ids import format_replica_id
from device_plugin.health.watcher import HealthWatcher, TransitionListener
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import EventWatch, ProbeResult
from testbed.allocation_doubles import EnvVarResponseBuilder, LowestIndexPolicy

WAIT_S = 10.0  # failure bound for anything that should happen promptly; never a performance claim
# Short periods so the threaded tests run in well under a second each.
FAST = HealthConfig(quiet_period_s=0.2, probe_interval_s=0.02, event_wait_s=0.05, retry_initial_s=0.02, retry_max_s=0.1)


def eventually(predicate: Callable[[], bool]) -> None:
    """Poll `predicate` until it holds (for state with no change notification, e.g. a stand-in's registrations)."""
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met within the wait bound")
        time.sleep(0.005)


def wait_until(resource: ResourceManager, predicate: Callable[[DeviceListSnapshot], bool]) -> DeviceListSnapshot:
    deadline = time.monotonic() + WAIT_S
    snapshot = resource.snapshot()
    while not predicate(snapshot):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{resource.resource_name}: condition not met; last list {snapshot}")
        snapshot = resource.wait_for_change(snapshot.version, left)
    return snapshot


def unhealthy_gpus(snapshot: DeviceListSnapshot) -> set[int]:
    return {i for d in snapshot.devices if not d.healthy for i in d.gpu_indices}


def gpus_are(expected: set[int]) -> Callable[[DeviceListSnapshot], bool]:
    return lambda snapshot: unhealthy_gpus(snapshot) == expected


class ManualClock:
    """An injected clock the test moves by hand."""

    def __init__(self, start_s: float = 1000.0) -> None:
        self.now_s = start_s

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


def whole_gpus(fake: FakeNvml, name: str = "nvidia.com/gpu") -> ResourceManager:
    devices = [Device(g.uuid, (g.index,), g.numa_node) for g in fake.gpus()]
    return ResourceManager(name, devices, LowestIndexPolicy(), EnvVarResponseBuilder())


def replicas(fake: FakeNvml, count: int, name: str = "nvidia.com/gpu.shared") -> ResourceManager:
    devices = [Device(format_replica_id(g.uuid, n), (g.index,), g.numa_node) for g in fake.gpus() for n in range(count)]
    return ResourceManager(name, devices, LowestIndexPolicy(), EnvVarResponseBuilder())


def mig_like(fake: FakeNvml, gpu_index: int, slices: int, name: str = "nvidia.com/mig-1g.10gb") -> ResourceManager:
    """MIG-device-shaped entries on one parent GPU (IDs only; MIG enumeration is the MIG feature's)."""
    gpu = fake.gpus()[gpu_index]
    devices = [Device(f"MIG-{gpu.uuid[4:]}-{n}", (gpu_index,), gpu.numa_node) for n in range(slices)]
    return ResourceManager(name, devices, LowestIndexPolicy(), EnvVarResponseBuilder())


@pytest.fixture
def fake() -> Iterator[FakeNvml]:
    backend = FakeNvml.from_machine("dgx1-v100")
    yield backend
    backend.close()


# ---- the HealthWatcher tests ---------------------------------------------------------------------


def start(
    source: object,
    resources: Sequence[ResourceManager],
    config: HealthConfig = FAST,
    indices: range = range(8),
    more: Sequence[TransitionListener] = (),
) -> HealthWatcher:
    """A started watcher telling `resources` and then `more` of every transition."""
    told = [*listeners(resources), *more]
    watcher = HealthWatcher(source, indices, config, listeners=told)  # type: ignore[arg-type]
    watcher.start()
    return watcher


def listeners(resources: Sequence[ResourceManager]) -> list[TransitionListener]:
    return [resource.on_health_transition for resource in resources]


class Flaky:
    """A HealthSource whose calls raise unexpected exceptions while `broken` is set."""

    def __init__(self, fake: FakeNvml) -> None:
        self.fake = fake
        self.broken = threading.Event()

    def open_event_watch(self, indices: tuple[int, ...]) -> EventWatch:
        if self.broken.is_set():
            raise RuntimeError("driver exploded")
        return self.fake.open_event_watch(indices)

    def probe(self, index: int) -> ProbeResult:
        if self.broken.is_set():
            raise ZeroDivisionError("bug in a backend")
        return self.fake.probe(index)


class Counting(Flaky):
    """Counts probe calls, so a test can wait for whole probe rounds to pass."""

    def __init__(self, fake: FakeNvml) -> None:
        super().__init__(fake)
        self.probes = 0

    def probe(self, index: int) -> ProbeResult:
        self.probes += 1
        return self.fake.probe(index)


@pytest.fixture
def managers(fake: FakeNvml) -> list[ResourceManager]:
    return [whole_gpus(fake), replicas(fake, 4), mig_like(fake, 3, 3)]


@pytest.fixture
def watcher(fake: FakeNvml, managers: list[ResourceManager]) -> Iterator[HealthWatcher]:
    started = start(fake, managers)
    yield started
    started.stop()
