"""A slow API server: the claims of one call are read concurrently, and Unprepare never waits.

Reproduction of issue 18 item 4: with claim reads taking 5 s, 4 calls of 4 claims each read their
claims one after another (20 s a call), and an Unprepare waited 19 s. The reads are awaited on the serving
loop (the fetcher), so a held read takes no worker: a wedged worker turning liveness red is
a stuck settle's (the blocking claim reader whose reads ran in workers was test-only, and is gone).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from device_plugin.dra_helper.service.offload import PREPARE_WORKERS
from device_plugin.dra_helper.service.socket_paths import SocketPaths
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

CALLS, CLAIMS_PER_CALL = 4, 4


@pytest.fixture
def held() -> Iterator[HeldClaims]:
    claims = HeldClaims(hold=True)
    yield claims
    claims.release.set()


def test_the_claims_of_every_call_are_read_at_once_while_unprepare_answers(root: Path, held: HeldClaims) -> None:
    assert CALLS * CLAIMS_PER_CALL <= PREPARE_WORKERS
    server = dra_server(root, reader=held)
    server.start()
    endpoint = SocketPaths.for_driver(DRIVER, root).endpoint
    try:
        calls = [
            [held.add(f"c{c}-{i}", f"uid-{c}-{i}", f"gpu-{i}", admin=True) for i in range(CLAIMS_PER_CALL)]
            for c in range(CALLS)
        ]
        with ThreadPoolExecutor(CALLS) as kubelet:
            pending = [kubelet.submit(prepare, endpoint, claims, 30.0) for claims in calls]
            wait_until(lambda: held.held == CALLS * CLAIMS_PER_CALL)  # every claim of every call is being read
            assert unprepare(endpoint, [("ns", "uid-x", "x")], timeout_s=WAIT_S).claims["uid-x"].error == ""
            assert server.serving()[0]  # slow reads are no wedge
            held.release.set()
            answers = [p.result(timeout=30.0) for p in pending]
        assert all(entry.error == "" for answer in answers for entry in answer.claims.values())
        assert sum(len(answer.claims) for answer in answers) == CALLS * CLAIMS_PER_CALL
    finally:
        server.stop(0.1)


def test_a_settle_stuck_past_the_limit_turns_liveness_red_and_back(root: Path) -> None:
    claims, devices = HeldClaims(), Devices(stuck=threading.Event())
    assert devices.stuck is not None
    server = dra_server(root, reader=claims, devices=devices, wedged_after_s=0.3)
    server.start()
    endpoint = SocketPaths.for_driver(DRIVER, root).endpoint
    try:
        claim = claims.add("stuck", "uid-1", "gpu-0")
        with ThreadPoolExecutor(1) as kubelet:
            pending = kubelet.submit(prepare, endpoint, [claim], 30.0)
            assert devices.entered.wait(WAIT_S)  # the settle waits in its prepare worker
            time.sleep(0.4)  # past the (shortened) limit
            wait_until(lambda: not server.serving()[0])
            ok, detail = server.serving()
            assert not ok and "NodePrepareResources of claim ns/stuck" in detail and "wedged" in detail
            devices.stuck.set()
            assert pending.result(timeout=30.0).claims["uid-1"].error == ""
        wait_until(lambda: server.serving()[0])
    finally:
        server.stop(0.1)
