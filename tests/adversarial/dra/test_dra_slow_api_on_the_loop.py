"""Issue 18 item 4 on the production read path: claims read by the API-server fetcher on the serving loop.

With an API server that holds every claim GET, the claims of one call and of every call are read at once,
up to the fetcher's cap of reads in flight (the rest wait their turn, never more on the wire), while an
Unprepare and the liveness check answer at once; every claim is answered once the server lets go.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from device_plugin.dra_helper.api.kube import api_client
from device_plugin.dra_helper.api.transport import ApiTransport
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.claims.api_read import READS_IN_FLIGHT, ApiClaimFetcher
from device_plugin.dra_helper.claims.prepare import Preparer
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from device_plugin.serving import event_loop
from tests.adversarial.dra.harness import (
    DRIVER,
    WAIT_S,
    Devices,
    HeldClaims,
    dra_server,
    prepare,
    unprepare,
    wait_until,
)
from tests.dra.http_serving import QuietHandler, http_server

CALLS, CLAIMS_PER_CALL = 2, READS_IN_FLIGHT  # twice the cap in all


@dataclass
class Gate:
    """What the held API server saw: claim GETs waiting now, the most at once."""

    claims: HeldClaims
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: int = 0
    most: int = 0


def _handler(gate: Gate) -> type[BaseHTTPRequestHandler]:
    class Held(QuietHandler):
        def do_GET(self) -> None:
            with gate.lock:
                gate.waiting += 1
                gate.most = max(gate.most, gate.waiting)
            gate.release.wait(30.0)
            with gate.lock:
                gate.waiting -= 1
            self.answer_json(gate.claims.claims[("ns", self.path.rsplit("/", 1)[-1])])

    return Held


@pytest.fixture
def gate() -> Iterator[tuple[Gate, str]]:
    held = Gate(HeldClaims())
    with http_server(_handler(held)) as port:
        try:
            yield held, f"http://127.0.0.1:{port}"
        finally:
            held.release.set()  # before the server's shutdown waits for its handlers


def test_reads_on_the_loop_run_at_once_up_to_the_cap_while_unprepare_answers(
    root: Path, gate: tuple[Gate, str]
) -> None:
    held, host = gate
    fetcher = ApiClaimFetcher(ApiTransport(api_client(host)), lambda: "v1")
    preparer = Preparer(
        driver_name=DRIVER,
        fetcher=fetcher,
        driver=Devices().decision(),
        checkpoint=Checkpoint(root / "plugins" / DRIVER / "checkpoint.json"),
    )
    server = dra_server(root, preparer=preparer)
    server.start()
    endpoint = SocketPaths.for_driver(DRIVER, root).endpoint
    try:
        calls = [
            [held.claims.add(f"c{c}-{i}", f"uid-{c}-{i}", f"gpu-{i % 8}", admin=True) for i in range(CLAIMS_PER_CALL)]
            for c in range(CALLS)
        ]
        with ThreadPoolExecutor(CALLS) as kubelet:
            pending = [kubelet.submit(prepare, endpoint, claims, 30.0) for claims in calls]
            wait_until(lambda: held.waiting == READS_IN_FLIGHT)  # the loop sent the cap's worth at once
            assert unprepare(endpoint, [("ns", "uid-x", "x")], timeout_s=WAIT_S).claims["uid-x"].error == ""
            assert server.serving()[0]  # the loop answers: slow reads are no wedge
            held.release.set()
            answers = [p.result(timeout=30.0) for p in pending]
        assert [entry.error for answer in answers for entry in answer.claims.values()] == [""] * CALLS * CLAIMS_PER_CALL
        assert held.most == READS_IN_FLIGHT  # never more on the wire than the cap
    finally:
        server.stop(0.1)
        event_loop.run(fetcher.transport.close(), timeout_s=WAIT_S)  # its session lives on the serving loop
