"""A claim's prepared state never goes backwards: an Unprepare that succeeded stays effective.

Reproductions of issue 18 item 1: a Prepare whose claim read outlived the kubelet's deadline wrote the
claim into the checkpoint after the kubelet had unprepared it, and the next Prepare of the same UID,
re-allocated another GPU, was answered the old GPU from the checkpoint.
"""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import pytest

from device_plugin.dra_helper.claims.prepare import ClaimRef, PrepareResult
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from tests.adversarial.dra.harness import (
    DRIVER,
    HeldClaims,
    dra_server,
    prepare,
    prepared_here,
    preparer_of,
    unprepare,
    wait_until,
)


def _devices(result: PrepareResult) -> list[str]:
    return [d.device_name for d in result.devices]


def test_a_prepare_that_finishes_after_the_unprepare_writes_nothing(root: Path) -> None:
    held = HeldClaims(hold=True)
    ns, uid, name = held.add("c", "uid-1", "gpu-4")
    preparer = preparer_of(root, held)
    late: list[dict[str, PrepareResult]] = []
    prepare_thread = threading.Thread(target=lambda: late.append(prepared_here(preparer, [ClaimRef(ns, uid, name)])))
    prepare_thread.start()
    wait_until(lambda: held.held == 1)  # the Prepare waits on the API server
    assert preparer.unprepare([ClaimRef(ns, uid, name)]) == {uid: ""}
    held.release.set()
    prepare_thread.join(10.0)
    assert "unprepared while this Prepare read it" in late[0][uid].error
    assert preparer_of(root, held).holders.holders("gpu-4") == ()  # nothing checkpointed: a restart agrees
    held.add("c", "uid-1", "gpu-6")  # the claim re-allocated another GPU, asked of a restarted driver
    assert _devices(prepared_here(preparer_of(root, held), [ClaimRef(ns, uid, name)])[uid]) == ["gpu-6"]
    assert preparer.in_flight() == 0  # no lock entry left behind


@pytest.mark.parametrize("read", ["blocking", "fetched"], ids=["in-a-worker", "on-the-loop"])
def test_a_prepare_the_kubelet_gave_up_on_writes_nothing(root: Path, read: str) -> None:
    held = HeldClaims(hold=True)
    claim = held.add("c", "uid-1", "gpu-4")
    preparer = preparer_of(root, held if read == "blocking" else held.fetched())
    server = dra_server(root, preparer=preparer)
    server.start()
    try:
        endpoint = SocketPaths.for_driver(DRIVER, root).endpoint
        with pytest.raises(grpc.RpcError) as raised:
            prepare(endpoint, [claim], timeout_s=0.5)
        assert raised.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED  # type: ignore[attr-defined]
        held.release.set()
        wait_until(lambda: held.held == 0 and preparer.in_flight() == 0)
        # Not written: the re-read below would hide a stale entry (a changed allocation is prepared afresh).
        assert preparer.holders.holders("gpu-4") == preparer_of(root, held).holders.holders("gpu-4") == ()
        held.add("c", "uid-1", "gpu-6")
        assert [d.device_name for d in prepare(endpoint, [claim]).claims["uid-1"].devices] == ["gpu-6"]
    finally:
        server.stop(0.1)


def test_an_unprepare_while_the_loop_reads_the_claim_stays_effective(root: Path) -> None:
    """Item 1 with the claim read on the serving loop: the kubelet gives up, unprepares (served at once),
    and the read that comes back later writes nothing; the ticket goes with the settle."""
    held = HeldClaims(hold=True)
    claim = held.add("c", "uid-1", "gpu-4")
    preparer = preparer_of(root, held.fetched())
    server = dra_server(root, preparer=preparer)
    server.start()
    try:
        endpoint = SocketPaths.for_driver(DRIVER, root).endpoint
        with pytest.raises(grpc.RpcError):
            prepare(endpoint, [claim], timeout_s=0.3)
        assert unprepare(endpoint, [claim]).claims["uid-1"].error == ""
        held.release.set()
        wait_until(lambda: held.held == 0 and preparer.in_flight() == 0)
        assert preparer_of(root, held).holders.holders("gpu-4") == ()  # nothing checkpointed
        held.add("c", "uid-1", "gpu-6")
        assert [d.device_name for d in prepare(endpoint, [claim]).claims["uid-1"].devices] == ["gpu-6"]
    finally:
        server.stop(0.1)


@pytest.mark.parametrize("rounds", [20], ids=["20-races"])
def test_racing_prepares_and_unprepares_keep_memory_and_checkpoint_in_step(root: Path, rounds: int) -> None:
    held = HeldClaims()
    refs = [ClaimRef(*held.add(f"c{i}", f"uid-{i}", "gpu-4", admin=True)) for i in range(3)]
    preparer = preparer_of(root, held)
    for _ in range(rounds):
        start = threading.Barrier(2 * len(refs))
        finished: list[tuple[str, str]] = []  # (call, uid) in the order the calls returned (append is atomic)

        def call(
            kind: str, ref: ClaimRef, barrier: threading.Barrier = start, finished: list[tuple[str, str]] = finished
        ) -> None:
            barrier.wait()
            if kind == "prepare":
                prepared_here(preparer, [ref])
            else:
                preparer.unprepare([ref])
            finished.append((kind, ref.uid))

        threads = [threading.Thread(target=call, args=(kind, r)) for r in refs for kind in ("prepare", "unprepare")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10.0)
        # What this driver believes it holds is what a restart would read back from the checkpoint.
        held_now = preparer.holders.holders("gpu-4")
        assert held_now == preparer_of(root, held).holders.holders("gpu-4")
        for ref in refs:  # an Unprepare that returned after the Prepare did leaves nothing behind
            if finished.index(("unprepare", ref.uid)) > finished.index(("prepare", ref.uid)):
                assert ref.uid not in held_now
    assert preparer.in_flight() == 0  # every lock entry went with its last user


def test_a_checkpointed_claim_whose_allocation_changed_is_prepared_afresh(root: Path) -> None:
    held = HeldClaims()
    ns, uid, name = held.add("c", "uid-1", "gpu-4")
    preparer = preparer_of(root, held)
    assert _devices(prepared_here(preparer, [ClaimRef(ns, uid, name)])[uid]) == ["gpu-4"]
    held.add("c", "uid-1", "gpu-6")  # deallocated and allocated again while the kubelet was away
    assert _devices(prepared_here(preparer, [ClaimRef(ns, uid, name)])[uid]) == ["gpu-6"]
    other = held.add("d", "uid-2", "gpu-4")
    assert prepared_here(preparer, [ClaimRef(*other)])["uid-2"].error == ""  # gpu-4 was let go
