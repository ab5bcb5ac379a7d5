"""Another process serving the DRA endpoint's path (NVIDIA's DRA driver with the same driver name, or a
second copy of ours) is not fought over: one ERROR, the registration withdrawn, serving() says why, and
the endpoint is served again once the path is free. Same mechanism as the device plugin's
(serving/taken_socket.py; tests/adversarial/test_socket_taken.py runs two real processes)."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.dra_helper.service.grpc_service import DraGrpcServer
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from tests.adversarial.dra.harness import DRIVER, dra_server, get_info, prepare, wait_until

CALM_S = 2.0  # long enough for dozens of keeper polls (every 0.05 s here): the old keeper rebound at each
FREE_AGAIN_S = 20.0  # the next look comes after the current backoff delay (growing to 10 s)


@pytest.fixture
def server(root: Path) -> Iterator[DraGrpcServer]:
    started = dra_server(root)
    started.start()
    yield started
    started.stop(0.1)


def test_an_endpoint_path_another_process_serves_is_waited_for_then_served_again(
    root: Path, server: DraGrpcServer, caplog: pytest.LogCaptureFixture
) -> None:
    paths = SocketPaths.for_driver(DRIVER, root)
    DraKubeletStandin(root / "plugins_registry").wait_for_plugin()
    foreign = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        foreign.bind(str(paths.endpoint.parent / "x"))
        foreign.listen(8)
        with caplog.at_level(logging.WARNING):
            os.rename(paths.endpoint.parent / "x", paths.endpoint)  # another driver's bind-and-rename
            held = paths.endpoint.lstat().st_ino
            wait_until(lambda: server.socket_taken() != "")
            time.sleep(CALM_S)
            assert paths.endpoint.lstat().st_ino == held  # left to its owner
            assert not paths.registration.exists()  # the kubelet is not sent to an endpoint we do not serve
            ok, detail = server.serving()
            assert not ok and "served by another process" in detail, detail
            # ours only: grpc.aio pollers of servers that earlier tests stopped can log a stray asyncio error
            errors = [
                r.getMessage()
                for r in caplog.records
                if r.levelno == logging.ERROR and r.name.startswith("device_plugin.")
            ]
            assert len(errors) == 1 and "NVIDIA's DRA driver" in errors[0] and str(paths.endpoint) in errors[0]

            foreign.close()
            paths.endpoint.unlink()
            wait_until(lambda: server.socket_taken() == "" and paths.registration.exists(), FREE_AGAIN_S)
        # Ours again (not by inode: the freed foreign one's number may be reused): our DRA service answers.
        assert prepare(paths.endpoint, []).claims == {}
        assert get_info(paths.registration).endpoint == str(paths.endpoint)
        wait_until(lambda: server.serving()[0])
    finally:
        foreign.close()
