"""Where the API server keeps no device taints, the sick GPU is never published untainted, not even for the
moment before the fallback (issue 33 item 3), and the logs say what was written and why it changed.

Before: the first write with a taint went out as it was, the server stored the sick GPU without its taint,
and only the answer made the driver write it again without the GPU (about 15 ms of an allocatable sick
GPU); the log counted the devices handed in (8), not those written (7); and the watch called our own write
whose taints the server dropped "changed by someone else (e.g. the kubelet)". Now the first write with
taints is preceded by a dry run of it, whose answer shows whether the server keeps them; every later
write is built for what is known. Each case checks every object the stand-in stored, at every write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from device_plugin.dra.inventory import DraDevice, build_devices
from device_plugin.dra_helper.api.devices import DeviceTaint
from device_plugin.dra_helper.api.publisher import SlicePublisher
from device_plugin.nvml.fake.machine import FakeNvml
from testbed.api_standin import ApiStandin
from testbed.dra_node import DRIVER, NODE, eventually
from testbed.scheduler_view import taints_of
from tests.allocation.machines import topology_of

DGX1 = build_devices(FakeNvml.from_machine("dgx1-v100"), topology_of("dgx1-v100"))[0]
XID = DeviceTaint("gpu.nvidia.com/xid", "79", "NoSchedule", "2026-01-01T00:00:00Z")


def sick(*gpus: int) -> list[DraDevice]:
    return [replace(d, taints=(XID,)) if d.gpu_index in gpus else d for d in DGX1]


SERVERS: dict[str, Callable[[ApiStandin], None]] = {
    "gate-off-drops-taints": lambda api: setattr(api, "keeps_taints", False),
    "refuses-taints-with-400": lambda api: setattr(api, "refuses_taints", True),
    "v1beta1-only-server": lambda api: setattr(api, "versions", ("v1beta1",)),
}
# The devices of each request, in order: a GPU sick at the process's first write, or only later.
HISTORIES = {
    "sick-at-the-first-write": [sick(3)],
    "sick-after-a-healthy-first-write": [list(DGX1), sick(3)],
}


@pytest.fixture
def api() -> Iterator[ApiStandin]:
    standin = ApiStandin().up()
    standin.add_node(NODE)
    yield standin
    standin.down()
    assert standin.invalid == []


def untainted_sick(api: ApiStandin, gpu: str, since: int = 0) -> list[int]:
    """The pool generations of the snapshots stored after the first `since` that list `gpu` without a taint."""
    return [
        s["spec"]["pool"]["generation"]
        for s in api.snapshots()[since:]
        if s["spec"].get("driver") == DRIVER
        and gpu in {d["name"] for d in s["spec"]["devices"]}
        and gpu not in taints_of([s])
    ]


@pytest.mark.parametrize("history", HISTORIES.values(), ids=HISTORIES.keys())
@pytest.mark.parametrize("server", SERVERS.values(), ids=SERVERS.keys())
def test_the_sick_gpu_is_never_stored_untainted_and_the_log_counts_what_was_written(
    api: ApiStandin,
    server: Callable[[ApiStandin], None],
    history: list[list[DraDevice]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server(api)
    p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE, backoff_max_s=0.2)
    p.start()
    try:
        with caplog.at_level(logging.INFO):
            for devices in history:
                healthy = len(api.snapshots())  # what was stored while gpu-3 was still healthy
                p.request(devices)
                assert p.wait_synced(10.0)
    finally:
        p.stop(2.0, unpublish=False)
    listed = [d["name"] for s in api.pool(DRIVER, NODE) for d in s["spec"]["devices"]]
    assert "gpu-3" not in listed and len(listed) == 7 and not p.taints_kept
    assert untainted_sick(api, "gpu-3", since=healthy) == []
    published = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"pool {NODE}: generation")]
    assert published[-1].endswith("7 devices in 1 slices"), published
    assert not [r for r in caplog.records if "someone else" in r.getMessage()]


def test_the_check_can_fail_a_healthy_gpu_stored_untainted_is_counted() -> None:
    api = ApiStandin().up()
    try:
        api.add_node(NODE)
        p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE)
        assert p.reconcile(DGX1) == 1
        assert untainted_sick(api, "gpu-3") == [1]
    finally:
        api.down()


def test_our_write_whose_taints_the_server_dropped_is_not_someone_elses_change(
    api: ApiStandin, caplog: pytest.LogCaptureFixture
) -> None:
    """The gate turned off after the driver found taints kept (an API server restarted with other flags): the
    write's watch event, here arriving before its answer, is told apart from a change by someone else."""
    p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE, backoff_max_s=0.2)
    p.start()
    try:
        p.request(sick(3))
        assert p.wait_synced(10.0) and p.taints_kept
        api.keeps_taints, api.answer_delay_s = False, 0.3
        seen = p.watch.events_seen
        with caplog.at_level(logging.INFO):
            p.request(sick(3, 5))
            assert p.wait_synced(10.0)
            assert eventually(lambda: any("dropped the taints" in r.getMessage() for r in caplog.records))
    finally:
        p.stop(2.0, unpublish=False)
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "someone else" in m], messages
    dropped = [m for m in messages if "dropped the taints" in m]
    assert dropped and "the server dropped the taints (device taints off?)" in dropped[0], dropped
    assert p.watch.events_seen == seen and not p.taints_kept
    listed = [d["name"] for s in api.pool(DRIVER, NODE) for d in s["spec"]["devices"]]
    assert "gpu-3" not in listed and "gpu-5" not in listed and len(listed) == 6
