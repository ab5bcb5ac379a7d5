"""The API server and the kubelet for a DRA benchmark, each in a process of its own, as on a node.

Used by bench_checkpoint.py (b-e) and bench_dra.py (d, the NodePrepareResources rows): the driver runs in
the benchmark's process (dra_driver.Driver), the API stand-in (with its claims) in a child process, and the
kubelet's gRPC client in another, so that neither one's Python work competes with the driver for its
interpreter lock, which a real API server and kubelet never do. Boundary: processes and claims; no figures.
"""

from __future__ import annotations

import multiprocessing
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import grpc
from dra_driver import DRIVER, NODE, Driver

from api import dra_v1_pb2, dra_v1_pb2_grpc
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.api_objects import allocated_claim
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.api_standin import ApiStandin

CALL_TIMEOUT_S = 300.0  # a figure, however bad, is printed rather than cut off at the kubelet's deadline


def claim_object(n: int) -> dict[str, object]:
    """ResourceClaim c<n> (UID u<n>), allocated gpu-<n % 8> with admin access (many claims may share a GPU)."""
    result = {"request": "gpus", "driver": DRIVER, "pool": NODE, "device": f"gpu-{n % 8}", "adminAccess": True}
    return allocated_claim("ns", f"c{n}", f"u{n}", [result])


def claim_refs(count: int) -> list[tuple[str, str, str]]:
    """(namespace, uid, name) of the claims c0 .. c<count - 1>."""
    return [("ns", f"u{n}", f"c{n}") for n in range(count)]


def serve_api(conn: Connection, claims: int) -> None:
    """The API stand-in with the node and `claims` claims, in a process of its own (as the API server is),
    until told to stop; sends its port first."""
    api = ApiStandin().up()
    api.add_node(NODE)
    for n in range(claims):
        api.claims[("ns", f"c{n}")] = claim_object(n)
    conn.send(api.port)
    conn.recv()
    api.down()


class RemoteApi:
    """serve_api in a child process; `host` is what the driver's API client talks to."""

    def __init__(self, claims: int) -> None:
        self._conn, child = multiprocessing.get_context("spawn").Pipe()
        self._process = multiprocessing.get_context("spawn").Process(target=serve_api, args=(child, claims))
        self._process.start()
        self.host = f"http://127.0.0.1:{self._conn.recv()}"

    def down(self) -> None:
        self._conn.send("stop")
        self._process.join(10)


@dataclass(frozen=True)
class Apart:
    """A running driver whose API stand-in runs in a process of its own; `endpoint` is its DRA socket."""

    root: Path
    driver: Driver
    endpoint: str


@contextmanager
def driver_apart(machine: str, claims: int, before_start: Callable[[Path], None] | None = None) -> Iterator[Apart]:
    """The driver on `machine` in this process, the API stand-in (with claims c0 .. c<claims - 1>) in another,
    registered with a DRA kubelet stand-in; `before_start(root)` runs before the driver starts. Stopped and
    removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="bdra-", dir="/tmp"))
    api = RemoteApi(claims)
    try:
        if before_start is not None:
            before_start(root)
        driver = Driver(root, api, FakeNvml.from_machine(machine))  # type: ignore[arg-type]
        try:
            yield Apart(root, driver, DraKubeletStandin(root / "plugins_registry").wait_for_plugin().endpoint)
        finally:
            driver.stop()
    finally:
        api.down()
        shutil.rmtree(root, ignore_errors=True)


def errors_of(response: dra_v1_pb2.NodePrepareResourcesResponse) -> int:
    return sum(1 for entry in response.claims.values() if entry.error)


def serial_client(endpoint: str, claims: list[tuple[str, str, str]]) -> tuple[list[float], int]:
    """The kubelet's side, run in a process of its own: one NodePrepareResources per claim, in turn, each
    followed by its NodeUnprepareResources; the prepares' round trips (ms) and their claim errors."""
    samples, errors = [], 0
    with grpc.insecure_channel(f"unix:{endpoint}") as channel:
        grpc.channel_ready_future(channel).result(timeout=30)  # connected before the first call is timed
        stub = dra_v1_pb2_grpc.DRAPluginStub(channel)
        for namespace, uid, name in claims:
            claim = dra_v1_pb2.Claim(namespace=namespace, uid=uid, name=name)
            started = time.perf_counter()
            response = stub.NodePrepareResources(
                dra_v1_pb2.NodePrepareResourcesRequest(claims=[claim]), timeout=CALL_TIMEOUT_S
            )
            samples.append((time.perf_counter() - started) * 1000)
            errors += errors_of(response)
            stub.NodeUnprepareResources(
                dra_v1_pb2.NodeUnprepareResourcesRequest(claims=[claim]), timeout=CALL_TIMEOUT_S
            )
    return samples, errors
