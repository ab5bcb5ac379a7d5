"""/healthz and /readyz in mode dra follow what is actually served.

On main 67e3c9c liveness was "the publisher thread is alive" and readiness "registered and published":
with the DRA sockets removed, or the serving loop wedged, both stayed 200.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.serving import event_loop
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.api_standin import ApiStandin
from tests.adversarial.dra.harness import wait_until

DRIVER, NODE = "gpu.nvidia.com", "node-a"


@pytest.fixture
def driver() -> Iterator[DraFrontEnd]:
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))  # short: unix socket paths hold 107 bytes
    api = ApiStandin().up()
    api.add_node(NODE)
    front_end = DraFrontEnd(api_client(api.host), node_name=NODE, driver_name=DRIVER, kubelet_dir=root)
    front_end.start()  # no devices: an empty pool is still a pool
    try:
        DraKubeletStandin(root / "plugins_registry").wait_for_plugin()
        wait_until(lambda: front_end.readiness().ok and front_end.liveness().ok)
        yield front_end
    finally:
        front_end.stop(2.0)
        api.down()
        shutil.rmtree(root, ignore_errors=True)


def test_both_probes_fail_while_the_serving_loop_does_not_answer(driver: DraFrontEnd) -> None:
    release = threading.Event()
    event_loop.call_soon(release.wait, 20.0)  # what a handler that never returns does to the loop
    try:
        wait_until(lambda: not driver.liveness().ok)
        assert "did not answer" in driver.liveness().detail
        assert not driver.readiness().ok and "did not answer" in driver.readiness().detail
    finally:
        release.set()
    wait_until(lambda: driver.liveness().ok and driver.readiness().ok)


def test_liveness_fails_when_the_slice_watch_is_gone(driver: DraFrontEnd) -> None:
    """A dead watch would leave a wiped pool unrepaired: the kubelet should restart us."""
    driver.publisher.watch.stop()
    assert not driver.liveness().ok and "slice publisher" in driver.liveness().detail


def test_a_path_another_process_serves_turns_readiness_red_and_keeps_liveness_green(driver: DraFrontEnd) -> None:
    """Waiting for the other driver to go is right; a restart by the kubelet would change nothing."""
    endpoint = driver.server.paths.endpoint
    foreign = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        foreign.bind(str(endpoint.parent / "x"))
        foreign.listen(8)
        os.rename(endpoint.parent / "x", endpoint)
        # Until the keeper's next look (every 0.5 s) it says "removed or replaced"; then why it waits.
        wait_until(lambda: "served by another process" in driver.readiness().detail)
        assert not driver.readiness().ok
        live = driver.liveness()
        assert live.ok and "served by another process" in live.detail, live
    finally:
        foreign.close()


def test_both_probes_fail_naming_the_socket_while_it_cannot_be_served_again(driver: DraFrontEnd) -> None:
    """`rm -rf <kubelet>/plugins`, and a file where the folder was: the socket cannot come back until it goes."""
    folder = driver.server.paths.endpoint.parent.parent  # <kubelet>/plugins
    shutil.rmtree(folder)
    folder.write_text("not a folder")
    try:
        wait_until(lambda: not driver.liveness().ok and not driver.readiness().ok)
        assert str(driver.server.paths.endpoint) in driver.liveness().detail, driver.liveness()
        assert str(driver.server.paths.endpoint) in driver.readiness().detail, driver.readiness()
    finally:
        folder.unlink()
    wait_until(lambda: driver.liveness().ok and driver.readiness().ok)  # served afresh, registered again
