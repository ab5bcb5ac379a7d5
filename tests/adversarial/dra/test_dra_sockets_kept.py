"""The DRA sockets come back when removed, and liveness says so while they are gone or not answering.

On the thread-pool server this replaced, `rm -rf <kubelet>/plugins` left NodePrepareResources
UNAVAILABLE for good, a deleted registration socket never came back (the kubelet could not register
us again), and nothing could tell: probes stayed 200.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from device_plugin.dra_helper.service.grpc_service import DraGrpcServer
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from device_plugin.serving import event_loop
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from tests.adversarial.dra.harness import DRIVER, HeldClaims, dra_server, get_info, prepare, unprepare, wait_until


def _inode(path: Path) -> int | None:
    try:
        return path.lstat().st_ino
    except FileNotFoundError:
        return None


def test_rm_rf_plugins_brings_the_dra_socket_back_and_it_prepares(
    root: Path, server: DraGrpcServer, claims: HeldClaims
) -> None:
    paths = SocketPaths.for_driver(DRIVER, root)
    kubelet = DraKubeletStandin(root / "plugins_registry")
    plugin = kubelet.wait_for_plugin()
    before = _inode(paths.endpoint)
    shutil.rmtree(root / "plugins")  # the socket, its folder and the checkpoint
    wait_until(lambda: _inode(paths.endpoint) not in (None, before))
    claim = claims.add("c", "uid-1", "gpu-0")
    answer = kubelet.prepare(plugin, [claim])["uid-1"]
    assert answer.error == "" and [d.device_name for d in answer.devices] == ["gpu-0"]  # type: ignore[attr-defined]
    wait_until(lambda: server.serving()[0])


def test_a_deleted_registration_socket_is_served_afresh_and_the_kubelet_registers_again(
    root: Path, server: DraGrpcServer
) -> None:
    paths = SocketPaths.for_driver(DRIVER, root)
    DraKubeletStandin(root / "plugins_registry").wait_for_plugin()
    assert server.registration.status == (True, "")
    before = _inode(paths.registration)
    paths.registration.unlink()  # the kubelet deregisters us
    wait_until(lambda: _inode(paths.registration) not in (None, before))
    assert get_info(paths.registration).endpoint == str(paths.endpoint)
    assert server.registration.status is None  # the last word was about the old socket
    DraKubeletStandin(root / "plugins_registry").wait_for_plugin()
    assert server.registration.status == (True, "")


WHAT = {
    "endpoint": lambda p: p.endpoint.unlink(),
    "registration": lambda p: p.registration.unlink(),
    "plugins-folder": lambda p: shutil.rmtree(p.endpoint.parent.parent),
    "registry-folder": lambda p: shutil.rmtree(p.registration.parent),
}


@pytest.mark.parametrize("what", sorted(WHAT), ids=[f"{w}-removed" for w in sorted(WHAT)])
def test_serving_is_false_naming_the_socket_while_it_is_missing(root: Path, what: str) -> None:
    paths = SocketPaths.for_driver(DRIVER, root)
    server = dra_server(root, poll_s=3600.0)  # no keeper round while we look
    server.start()
    try:
        wait_until(lambda: server.serving()[0])
        WHAT[what](paths)
        ok, reason = server.serving()
        assert not ok
        assert "removed" in reason and (str(paths.endpoint) in reason or str(paths.registration) in reason), reason
    finally:
        server.stop(0.1)


def test_serving_is_false_while_the_sockets_do_not_answer(server: DraGrpcServer) -> None:
    wait_until(lambda: server.serving()[0])
    release = threading.Event()
    event_loop.call_soon(release.wait, 20.0)  # a handler that never returns would hold the loop like this
    try:
        wait_until(lambda: not server.serving()[0])
        assert "did not answer" in server.serving()[1]
    finally:
        release.set()
    wait_until(lambda: server.serving()[0])


def test_serving_is_false_before_start_and_after_stop(root: Path) -> None:
    server = dra_server(root)
    assert server.serving()[0] is False
    server.start()
    wait_until(lambda: server.serving()[0])
    server.stop(0.1)
    ok, reason = server.serving()
    assert not ok and "not kept" in reason
    paths = SocketPaths.for_driver(DRIVER, root)
    assert not paths.endpoint.exists() and not paths.registration.exists()


def test_the_sockets_answer_unprepare_after_being_served_afresh_many_times(root: Path, server: DraGrpcServer) -> None:
    paths = SocketPaths.for_driver(DRIVER, root)
    for _ in range(5):
        before = _inode(paths.endpoint)
        paths.endpoint.unlink()
        wait_until(lambda: _inode(paths.endpoint) not in (None, before))  # noqa: B023 (waited on at once)
    assert unprepare(paths.endpoint, [("ns", "u", "c")]).claims["u"].error == ""
    assert prepare(paths.endpoint, []).claims == {}
