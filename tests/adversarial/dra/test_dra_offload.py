"""The Preparer runs off the serving loop: a slow API server holds Prepares, never Unprepare or the loop.

On the thread-pool server this replaced, Prepares waiting on claim reads took every worker of the one
pool, so Unprepare queued behind them until the kubelet's deadline; a Preparer that raised came back as
UNKNOWN with its whole message.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from device_plugin.dra.grpc_service import DraGrpcServer, SocketPaths
from device_plugin.dra.servicers import PREPARE_WORKERS
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
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))  # short: unix socket paths hold 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


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


@pytest.mark.parametrize("waiting", [PREPARE_WORKERS, PREPARE_WORKERS * 3], ids=["pool-full", "pool-overrun"])
def test_unprepare_and_get_info_answer_while_prepares_wait_on_the_api_server(
    root: Path, server: DraGrpcServer, held: HeldClaims, waiting: int
) -> None:
    paths = SocketPaths.for_driver(DRIVER, root)
    claims = [held.add(f"c{i}", f"uid-{i}", "gpu-0") for i in range(waiting)]
    with ThreadPoolExecutor(waiting) as callers:
        pending = [callers.submit(prepare, paths.endpoint, [claim], 30.0) for claim in claims]
        wait_until(lambda: held.held == PREPARE_WORKERS)  # every Prepare worker waits on a claim read
        assert unprepare(paths.endpoint, [("ns", "uid-x", "x")]).claims["uid-x"].error == ""
        assert get_info(paths.registration).name == DRIVER  # the loop is free
        assert not any(p.done() for p in pending)
        held.release.set()
        answers = [p.result(timeout=30.0) for p in pending]
    assert [a.claims[f"uid-{i}"].error for i, a in enumerate(answers)] == [""] * waiting


def test_a_preparer_that_raises_is_internal_with_a_bounded_message(root: Path) -> None:
    claims = HeldClaims()
    claim = claims.add("c", "uid-1", "gpu-0")
    server = dra_server(root, reader=claims, devices=Devices(broken=True))
    server.start()
    try:
        paths = SocketPaths.for_driver(DRIVER, root)
        with pytest.raises(grpc.RpcError) as raised:
            prepare(paths.endpoint, [claim])
        assert raised.value.code() is grpc.StatusCode.INTERNAL  # type: ignore[attr-defined]
        details = raised.value.details()  # type: ignore[attr-defined]
        assert "NodePrepareResources" in details and "device view broke" in details
        assert len(details) <= MAX_DETAILS_CHARS
        assert server.serving()[0]  # the failure was the call's, not the server's
    finally:
        server.stop(0.1)
