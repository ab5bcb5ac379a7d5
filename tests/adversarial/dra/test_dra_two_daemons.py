"""Two DRA daemons on one kubelet directory (issue 30 items 1 and 2): a second one never acts on what it read
while it waited. Each daemon is the whole driver (the node runtime with the DRA front-end on a fake DGX-1,
the API stand-in), both on one kubelet directory; a foreign listening socket plays NVIDIA's DRA driver.

- A second copy of ours waits for the first's instance lock before it binds a socket or reads the
  checkpoint: when the first stops, it reads what the first confirmed last, so a rival claim on a GPU the
  first prepared meanwhile is refused, and its first write keeps the first's confirmed entry.
- Beside NVIDIA's driver with our driver name set to `gpu.nvidia.com`, nothing in NVIDIA's plugin data
  directory is read, migrated or set aside while its socket is served by NVIDIA.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from device_plugin.nvml.fake.machine import FakeNvml
from testbed.api_standin import ApiStandin
from testbed.dra_node import DRIVER, NODE, Node, eventually
from tests.adversarial.dra.harness import prepare

TAKE_OVER_S = 30.0  # the waiting daemon looks every 0.5 s (the lock) or with backoff up to 10 s (a socket)
NVIDIA = "gpu.nvidia.com"


@pytest.fixture
def api() -> Iterator[ApiStandin]:
    standin = ApiStandin().up()
    standin.add_node(NODE)
    yield standin
    standin.down()


@pytest.fixture
def daemons(api: ApiStandin) -> Iterator[list[Node]]:
    """Two daemons' Nodes on one short kubelet directory (stopped at the end, whichever still runs)."""
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    pair = [Node(root, api, FakeNvml.from_machine("dgx1-v100")) for _ in range(2)]
    yield pair
    for node in pair:
        node.stop()
    shutil.rmtree(root, ignore_errors=True)


def _errors(answer: object) -> dict[str, str]:
    return {uid: entry.error for uid, entry in answer.claims.items()}  # type: ignore[attr-defined]


def _serving(front_end: DraFrontEnd) -> bool:
    return front_end.server.serving()[0] and front_end.server.socket_taken() == ""


def test_a_second_daemon_takes_over_from_what_the_first_confirmed_last_not_from_its_snapshot(
    daemons: list[Node],
) -> None:
    first, second = daemons
    endpoint = SocketPaths.for_driver(DRIVER, first.root).endpoint
    one = first.start()
    assert eventually(lambda: _serving(one))
    early = first.claim("early", "uid-early", "gpu-0")
    assert _errors(prepare(endpoint, [early])) == {"uid-early": ""}  # a journal on disk before the second starts

    two = second.start()  # waits: the first holds the instance lock (and serves the sockets)
    assert eventually(lambda: two.server.socket_taken() != "")
    confirmed = first.claim("confirmed", "uid-confirmed", "gpu-3")
    assert _errors(prepare(endpoint, [confirmed])) == {"uid-confirmed": ""}  # after the second's start
    first.stop()  # the first goes; its claims stay prepared on the node

    assert eventually(lambda: _serving(two), TAKE_OVER_S)
    rival = first.claim("rival", "uid-rival", "gpu-3")
    errors = _errors(prepare(endpoint, [rival]))
    assert "device gpu-3 is already prepared for claim ns/confirmed (uid-confirmed)" in errors["uid-rival"]
    other = first.claim("other", "uid-other", "gpu-5")
    assert _errors(prepare(endpoint, [other])) == {"uid-other": ""}  # the second's first write (compacts)
    assert eventually(lambda: not list((first.root / "plugins" / DRIVER / "claims").glob("journal-1.log")))
    second.stop()

    kept = Checkpoint(first.root / "plugins" / DRIVER / "checkpoint.json")  # what a third start would read
    assert kept.uids() == ("uid-confirmed", "uid-early", "uid-other")


def test_beside_nvidias_driver_of_the_same_name_its_plugin_folder_is_left_as_it_is_while_it_serves(
    daemons: list[Node],
) -> None:
    ours = daemons[0]
    ours.config_file.write_text(f"version: v1\ngpuDevicePlugin:\n  mode: dra\n  driverName: {NVIDIA}\n")
    folder = ours.root / "plugins" / NVIDIA
    folder.mkdir(parents=True)
    theirs = folder / "checkpoint.json"  # NVIDIA's own checkpoint: not our format
    theirs.write_text('{"checksum": 1234, "v1": {"preparedClaims": {"uid-x": {"status": "PrepareCompleted"}}}}')
    written = theirs.read_bytes()
    nvidia = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        nvidia.bind(str(folder / "dra.sock"))
        nvidia.listen(8)
        front_end = ours.start()
        assert eventually(lambda: front_end.server.socket_taken() != "")
        ours.stop()
        left = {p.name for p in folder.iterdir()} - {"instance.lock"}  # our lock file is the one thing added
        assert left == {"checkpoint.json", "dra.sock"}  # not migrated, not set aside; no claims/ folder made
        assert theirs.read_bytes() == written
    finally:
        nvidia.close()
