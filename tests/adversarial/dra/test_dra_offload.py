"""The Preparer runs off the serving loop: a slow API server holds Prepares, never Unprepare or the loop.

On the thread-pool server this replaced, Prepares waiting on claim reads took every worker of the one
pool, so Unprepare queued behind them until the kubelet's deadline; a Preparer that raised came back as
UNKNOWN with its whole message (now: that claim's error, cut short).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from device_plugin.dra_helper.service.grpc_service import DraGrpcServer
from device_plugin.dra_helper.service.offload import PREPARE_WORKERS
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from tests.adversarial.dra.harness import (
    DRIVER,
    Devices,
    HeldClaims,
    dra_server,
    get_info,
    prepare,
    unprepare,
    wait_until,
)

MAX_DETAILS_CHARS = 2048  # what a status message may grow to, whatever went wrong


@pytest.fixture
def held() -> Iterator[HeldClaims]:
    claims = HeldClaims(hold=True)
    yield claims
    claims.release.set()


@pytest.fixture
def server(root: Path, held: HeldClaims) -> Iterator[DraGrpcServer]:
    started = dra_server(root, reader=held)
    started.start()
    yield started
    held.release.set()
    started.stop(0.1)


@pytest.mark.parametrize(
    "waiting", [PREPARE_WORKERS, PREPARE_WORKERS * 3], ids=["as-many-as-workers", "three-times-the-workers"]
)
def test_unprepare_and_get_info_answer_while_prepares_wait_on_the_api_server(
    root: Path, server: DraGrpcServer, held: HeldClaims, waiting: int
) -> None:
    paths = SocketPaths.for_driver(DRIVER, root)
    # adminAccess: many claims may hold gpu-0 at once, so every one of them is prepared
    claims = [held.add(f"c{i}", f"uid-{i}", "gpu-0", admin=True) for i in range(waiting)]
    with ThreadPoolExecutor(waiting) as callers:
        pending = [callers.submit(prepare, paths.endpoint, [claim], 30.0) for claim in claims]
        wait_until(lambda: held.held == waiting)  # every Prepare waits on its claim read, on the loop
        assert unprepare(paths.endpoint, [("ns", "uid-x", "x")]).claims["uid-x"].error == ""
        assert get_info(paths.registration).name == DRIVER  # the loop is free
        assert not any(p.done() for p in pending)
        held.release.set()
        answers = [p.result(timeout=30.0) for p in pending]
    assert [a.claims[f"uid-{i}"].error for i, a in enumerate(answers)] == [""] * waiting


def test_a_preparer_that_raises_is_that_claims_bounded_one_line_error(root: Path) -> None:
    claims = HeldClaims()
    claim = claims.add("c", "uid-1", "gpu-0")
    server = dra_server(root, reader=claims, devices=Devices(broken=True))
    server.start()
    try:
        paths = SocketPaths.for_driver(DRIVER, root)
        error = prepare(paths.endpoint, [claim]).claims["uid-1"].error
        assert "ns/c (uid-1): internal error: RuntimeError: device view broke" in error
        assert len(error) <= MAX_DETAILS_CHARS and "\n" not in error
        assert server.serving()[0]  # the failure was the claim's, not the server's
    finally:
        server.stop(0.1)
