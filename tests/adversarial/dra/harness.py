"""A DRA driver's kubelet side on real sockets under a short temporary kubelet directory, with claim
readers that can be held (a slow API server) and a device view that can break (a Preparer bug).

Built from the dgx1-v100 machine; the kubelet is the DRA stand-in of tests/dra.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import grpc

from api import dra_v1_pb2, dra_v1_pb2_grpc
from api import pluginregistration_pb2 as reg_pb2
from api import pluginregistration_pb2_grpc as reg_grpc
from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.dra.inventory import build_devices
from device_plugin.dra.prepare_decision import PrepareDecision
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.checkpoint.values import PreparedDevice
from device_plugin.dra_helper.claims.claim import Allocation, ClaimRef, PrepareResult
from device_plugin.dra_helper.claims.prepare import Preparer
from device_plugin.dra_helper.service.grpc_service import DraGrpcServer
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.api_objects import allocated_claim
from testbed.observed import ObservedPreparer
from tests.allocation.machines import topology_of

DRIVER, NODE = DEFAULT_DRA_DRIVER_NAME, "node-a"  # the default driver name


@cache
def machine_uuids(machine: str) -> Mapping[str, str]:
    """Device name -> UUID of the DRA devices of a named machine (MIG devices where it has them)."""
    return {d.name: d.uuid for d in build_devices(FakeNvml.from_machine(machine), topology_of(machine))[0]}


DGX1 = machine_uuids("dgx1-v100")
WAIT_S = 10.0  # a bound for a loaded machine, not a timing claim


def wait_until(condition: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@dataclass
class Devices:
    """The dgx1-v100's devices; `broken` makes the Preparer raise (a bug, not a per-claim problem); while
    `stuck` is clear, a settle that asks for them waits (work stuck in a prepare worker), `entered` once set."""

    broken: bool = False
    uuids: Mapping[str, str] = field(default_factory=lambda: DGX1)
    stuck: threading.Event | None = None
    entered: threading.Event = field(default_factory=threading.Event)

    def decision(self) -> PrepareDecision:
        """The driver's prepare decision over these devices, broken or stuck as they say."""
        return _Decision(self)


class _Decision(PrepareDecision):
    def __init__(self, devices: Devices) -> None:
        super().__init__(driver_name=DRIVER, pool_name=NODE)
        self._devices = devices
        self.see(devices.uuids, frozenset(), {})

    def decide(self, body: Mapping[str, Any], allocation: Allocation) -> tuple[tuple[PreparedDevice, ...], list[str]]:
        devices = self._devices
        if devices.stuck is not None:
            devices.entered.set()
            devices.stuck.wait(30.0)
        if devices.broken:
            raise RuntimeError("device view broke\n" + "x" * 5000)
        return super().decide(body, allocation)


@dataclass
class HeldClaims:
    """ResourceClaims; with hold=True their reads wait until `release` is set (an API server that hangs)."""

    hold: bool = False
    claims: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)
    held: int = 0  # reads waiting now
    reads: int = 0  # reads started, all told
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not self.hold:
            self.release.set()

    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        with self.lock:
            self.held += 1
            self.reads += 1
        try:
            self.release.wait(30.0)
        finally:
            with self.lock:
                self.held -= 1
        return self.claims.get((namespace, name))

    def fetched(self) -> FetchedClaims:
        """The same claims behind a ClaimFetcher: read on the serving loop, as the API server's are."""
        return FetchedClaims(self)

    def add(self, name: str, uid: str, device: str, *, admin: bool = False) -> tuple[str, str, str]:
        """A claim `name` (namespace ns) allocated `device` of our pool; the (namespace, uid, name) to send."""
        result: dict[str, Any] = {"request": "g", "driver": DRIVER, "pool": NODE, "device": device}
        if admin:
            result["adminAccess"] = True
        self.claims[("ns", name)] = allocated_claim("ns", name, uid, [result])
        return ("ns", uid, name)


@dataclass
class FetchedClaims:
    """HeldClaims behind a ClaimFetcher, awaited on the serving loop as the API server's reads are: a held
    read waits without a thread (an API server that hangs takes no worker), counted as HeldClaims counts."""

    held: HeldClaims

    async def fetch_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        held = self.held
        with held.lock:
            held.held += 1
            held.reads += 1
        try:
            deadline = time.monotonic() + 30.0
            while not held.release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.005)  # the release is a threading.Event, set from the test's thread
        finally:
            with held.lock:
                held.held -= 1
        return held.claims.get((namespace, name))


def dra_server(
    root: Path,
    *,
    driver_name: str = DRIVER,
    kubelet_dir: Path | None = None,
    reader: HeldClaims | FetchedClaims | None = None,
    devices: Devices | None = None,
    poll_s: float = 0.05,
    wedged_after_s: float = 60.0,
    preparer: Preparer | None = None,
    instance: str = "",
) -> DraGrpcServer:
    """A DraGrpcServer (not started) for `driver_name` under `kubelet_dir` (default `root`); its
    checkpoint under `root`. `instance`: a pod UID, for the per-instance socket names."""
    preparer = preparer or preparer_of(root, reader if reader is not None else HeldClaims(), devices)
    paths = SocketPaths.for_driver(driver_name, kubelet_dir or root, instance)
    return DraGrpcServer(driver_name, paths, preparer, poll_s=poll_s, wedged_after_s=wedged_after_s)


def preparer_of(root: Path, reader: HeldClaims | FetchedClaims, devices: Devices | None = None) -> ObservedPreparer:
    """A Preparer over the checkpoint under `root` (a second one over the same root: a restart); held
    claims are fetched as the API server's are (each read awaited, the held wait in a thread of its own)."""
    return ObservedPreparer(
        driver_name=DRIVER,
        fetcher=reader.fetched() if isinstance(reader, HeldClaims) else reader,
        driver=(devices or Devices()).decision(),
        checkpoint=Checkpoint(root / "plugins" / DRIVER / "checkpoint.json"),
    )


def prepared_here(preparer: Preparer, claims: Sequence[ClaimRef]) -> dict[str, PrepareResult]:
    """Each claim through the Preparer's three steps in this thread, in turn (the servicer runs the same
    steps on the serving loop and its workers): its ticket, its fetch, its settle."""
    out = {}
    for claim in claims:
        ticket = preparer.ticket(claim.uid)
        try:
            out[claim.uid] = preparer.settle(claim, ticket, asyncio.run(preparer.fetch(claim)))
        finally:
            ticket.release()
    return out


def get_info(socket: Path, timeout_s: float = 5.0) -> reg_pb2.PluginInfo:
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        return reg_grpc.RegistrationStub(channel).GetInfo(reg_pb2.InfoRequest(), timeout=timeout_s)


def claims_request(message: Any, claims: list[tuple[str, str, str]]) -> Any:
    return message(claims=[dra_v1_pb2.Claim(namespace=n, uid=u, name=m) for n, u, m in claims])


def prepare(socket: Path, claims: list[tuple[str, str, str]], timeout_s: float = 5.0) -> Any:
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        request = claims_request(dra_v1_pb2.NodePrepareResourcesRequest, claims)
        return dra_v1_pb2_grpc.DRAPluginStub(channel).NodePrepareResources(request, timeout=timeout_s)


def unprepare(socket: Path, claims: list[tuple[str, str, str]], timeout_s: float = 5.0) -> Any:
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        request = claims_request(dra_v1_pb2.NodeUnprepareResourcesRequest, claims)
        return dra_v1_pb2_grpc.DRAPluginStub(channel).NodeUnprepareResources(request, timeout=timeout_s)
