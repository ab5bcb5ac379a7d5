"""Per-process isolation on the whole DRA node (runtime, front-end, API and kubelet stand-ins, the MPS
double): what the node publishes, and a share's health while its GPU's daemon is restarted by the watch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from device_plugin.dra_helper.service.device_health import DeviceHealthStatus
from testbed.dra_node import DRIVER, NODE, Node, eventually
from testbed.fake_mps_control import program
from tests.dra.mps.conftest import killed, stop_daemons
from tests.dra.test_memory_shares import allocated, share_result

OWN = "gpu-device-plugin.io"


@pytest.fixture
def per_process(node: Node) -> Iterator[Node]:
    node.config_file.write_text(
        "version: v1\n"
        "flags:\n"
        f"  mpsRoot: {node.root / 'mps'}\n"
        "gpuDevicePlugin:\n"
        "  mode: dra\n"
        "  memoryShares: true\n"
        "  shares:\n"
        "    isolation: per-process\n"
        f"    mpsControl: {program(node.root)}\n"
        f"    cdiSpecDir: {node.root / 'cdi'}\n"
    )
    yield node
    node.stop()
    stop_daemons(node.root)  # the driver leaves its daemons to their shares: the test's end removes them


def test_the_node_publishes_per_process_isolation_and_a_compute_capacity(per_process: Node) -> None:
    per_process.start()
    assert eventually(lambda: bool(per_process.listed()))
    device = next(d for s in per_process.api.pool(DRIVER, NODE) for d in s["spec"]["devices"] if d["name"] == "gpu-0")
    assert device["attributes"][f"{OWN}/memoryIsolation"] == {"string": "per-process"}
    assert device["capacity"]["compute"] == {
        "value": "100",
        "requestPolicy": {"default": "0", "validRange": {"min": "0", "step": "1"}},
    }


def test_a_dead_daemon_makes_its_shares_unhealthy_until_the_watch_restarts_it(per_process: Node) -> None:
    front_end = per_process.start()
    k = per_process.kubelet()
    plugin = k.wait_for_plugin()
    per_process.api.claims[("ns", "a")] = allocated("a", "uid-a", [share_result("gpu-0", "s-a", "8Gi")])
    assert k.prepare(plugin, [("ns", "uid-a", "a")])["uid-a"].error == ""
    mps = front_end.decision.mps
    assert mps is not None
    uuid = next(d.uuid for d in front_end.devices() if d.name == "gpu-0")
    seen: list[DeviceHealthStatus] = []
    mps.daemons.on_trouble = lambda u, why, tell=mps.daemons.on_trouble: (
        tell(u, why),
        seen.append(next(r.status for r in front_end.health.reports() if r.device_name == "gpu-0")),
    )
    old = mps.daemons.daemon(uuid).pid()
    killed(old or 0)
    assert eventually(lambda: len(seen) == 2)  # reported, then fine again once restarted
    assert seen == [DeviceHealthStatus.UNHEALTHY, DeviceHealthStatus.HEALTHY]
    assert mps.daemons.daemon(uuid).pid() not in (None, old)
    assert k.unprepare(plugin, [("ns", "uid-a", "a")]) == {"uid-a": ""}
    assert mps.daemons.daemon(uuid).pid() is None
