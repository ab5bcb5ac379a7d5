"""A pool deleted or changed behind the driver's back is republished, whatever the timing.

On main 67e3c9c, a restarted kubelet deleted the node's slices in the background while it registered the
running driver again; the driver's one resync listed the slices before the delete landed, found them
unchanged, and nothing ever looked again: with the delete 5-300 ms after the resync the pool was gone for
good. The same held for a slice that someone edited or deleted at any other time.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from device_plugin.config.loader import load_config
from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra.inventory import build_devices
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.dra_helper.api.publisher import SlicePublisher
from device_plugin.dra_helper.api.slice_store import SliceStore
from device_plugin.dra_helper.api.slices import build_slices
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.api_standin import ApiStandin
from tests.adversarial.dra.harness import WAIT_S, wait_until
from tests.allocation.machines import topology_of

DRIVER, NODE = DEFAULT_DRA_DRIVER_NAME, "node-a"  # the default driver name
DGX1 = build_devices(FakeNvml.from_machine("dgx1-v100"), topology_of("dgx1-v100"))[0]


@pytest.fixture
def api() -> Iterator[ApiStandin]:
    standin = ApiStandin().up()
    standin.add_node(NODE)
    yield standin
    standin.down()
    assert standin.invalid == []


@pytest.fixture
def publisher(api: ApiStandin) -> Iterator[SlicePublisher]:
    p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE, backoff_max_s=0.2)
    p.start()
    p.request(DGX1)
    assert p.wait_synced(10.0)
    yield p
    p.stop(2.0)


def _devices(api: ApiStandin) -> list[str]:
    return [d["name"] for s in api.pool(DRIVER, NODE) for d in s["spec"]["devices"]]


@pytest.fixture
def driver(api: ApiStandin) -> Iterator[DraFrontEnd]:
    """The whole DRA front-end under the node runtime (dgx1-v100), registered with the kubelet stand-in."""
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))  # short: unix socket paths hold 107 bytes
    config = load_config(env={"METRICS_ADDRESS": ""})
    config = replace(config, daemon=replace(config.daemon, device_plugin_dir=root / "device-plugins"))
    front_end = DraFrontEnd.for_config(config, api_client(api.host), node_name=NODE, backoff_max_s=0.2)
    runtime = NodeRuntime(FakeNvml.from_machine("dgx1-v100"), config, front_end, load_config=lambda: config)
    runtime.start()
    try:
        DraKubeletStandin(root / "plugins_registry").wait_for_plugin()
        assert front_end.publisher.wait_synced(10.0)
        front_end.registry = root / "plugins_registry"  # type: ignore[attr-defined]
        yield front_end
    finally:
        runtime.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("delay_s", [0.005, 0.05, 0.3], ids=["wipe-5ms-later", "wipe-50ms-later", "wipe-300ms-later"])
def test_the_kubelets_start_up_wipe_after_our_resync_is_republished(
    api: ApiStandin, driver: DraFrontEnd, delay_s: float
) -> None:
    """The kubelet restarts: it registers us again (we resync: the pool is intact) and its background
    delete of every slice of the node lands `delay_s` after that resync."""
    registry: Path = driver.registry  # type: ignore[attr-defined]
    generation = driver.publisher.generation
    DraKubeletStandin(registry).wait_for_plugin()  # re-registration: our resync runs ...
    assert driver.publisher.wait_synced(10.0)  # ... and finds the pool unchanged
    time.sleep(delay_s)
    wiped_at = time.monotonic()
    assert api.wipe_node(NODE) == 1
    wait_until(lambda: len(_devices(api)) == len(DGX1))
    print(f"republished {time.monotonic() - wiped_at:.3f} s after a wipe {delay_s * 1000:.0f} ms after our resync")
    assert api.pool(DRIVER, NODE)[0]["spec"]["pool"]["generation"] == generation + 1


def test_a_slice_edited_by_someone_else_is_put_back(api: ApiStandin, publisher: SlicePublisher) -> None:
    (name,) = api.slices
    edited = dict(api.slices[name])
    edited["spec"] = {**edited["spec"], "devices": edited["spec"]["devices"][:1]}
    with api._lock:  # another client's PUT, as the stand-in stores it
        api._store(edited)
    wait_until(lambda: _devices(api) == [d.name for d in DGX1])


def test_a_stray_slice_in_our_pool_is_deleted(api: ApiStandin, publisher: SlicePublisher) -> None:
    (ours,) = api.slices
    stray = {**api.slices[ours], "metadata": {"name": f"{NODE}-left-over"}}
    api.add_slice(stray)
    wait_until(lambda: sorted(api.slices) == [ours])


def test_the_watch_resumes_after_the_api_server_comes_back(api: ApiStandin, publisher: SlicePublisher) -> None:
    watches = sum(1 for m, _ in api.requests if m == "WATCH")
    api.down()
    time.sleep(0.3)  # the watch's stream ends; its retries are refused
    api.up()
    wait_until(lambda: sum(1 for m, _ in api.requests if m == "WATCH") > watches)
    api.wipe_node(NODE)
    wait_until(lambda: len(_devices(api)) == len(DGX1))


def test_our_own_writes_cost_no_extra_reconcile(
    api: ApiStandin, publisher: SlicePublisher, caplog: pytest.LogCaptureFixture
) -> None:
    """The watch reports our own changes too; they are recognised, so a republish is one LIST, not a loop."""
    with caplog.at_level(logging.INFO, logger="device_plugin.dra_helper.api.slice_watch"):
        publisher.request(DGX1[:4])
        assert publisher.wait_synced(10.0)
        time.sleep(0.5)  # the events of our writes arrive meanwhile
    assert publisher.watch.events_seen == 0, [r.getMessage() for r in caplog.records]


def test_stop_ends_the_watch_at_once_and_nothing_is_republished_after(
    api: ApiStandin, publisher: SlicePublisher
) -> None:
    assert publisher.stop(WAIT_S)
    # stop() joins the watch for at most 1 s; its shut stream ends it at once, though a loaded box may take
    # longer to run the thread out. Not shut, it would run on for WATCH_S (300 s).
    wait_until(lambda: not publisher.watch.running() and not publisher.running())
    count = len(api.requests)
    api.add_slice({**_dgx1_slice(), "metadata": {"name": "someone-elses"}})
    time.sleep(0.3)
    assert len(api.requests) == count and api.pool(DRIVER, NODE)[0]["metadata"]["name"] == "someone-elses"


def _dgx1_slice() -> dict[str, object]:
    (obj,) = build_slices(DGX1, node_name=NODE, driver_name=DRIVER, generation=1)
    return obj


def test_a_watch_held_open_by_a_silent_server_does_not_hold_stop(api: ApiStandin) -> None:
    """No event for a long time is the normal case; stop() must not wait for the next one."""
    p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE)
    p.start()
    p.request(DGX1)
    assert p.wait_synced(10.0)
    wait_until(lambda: any(m == "WATCH" for m, _ in api.requests))
    done = threading.Event()
    threading.Thread(target=lambda: (p.stop(3 * WAIT_S), done.set()), daemon=True).start()
    assert done.wait(WAIT_S), "stop() waited for the silent watch"  # well inside its own budget
    wait_until(lambda: not p.watch.running())  # the silent stream was shut: it would run on for WATCH_S


def test_a_watch_that_ends_at_once_is_resumed_after_a_backoff_not_in_a_spin(api: ApiStandin) -> None:
    """A proxy that closes each stream at once must not turn the watch into a request loop."""
    api.watch_ends_at_once = True
    p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE, backoff_max_s=0.5)
    p.start()
    p.request(DGX1)
    try:
        assert p.wait_synced(10.0)
        wait_until(lambda: any(m == "WATCH" for m, _ in api.requests))
        before = sum(1 for m, _ in api.requests if m == "WATCH")
        time.sleep(2.0)
        watches = sum(1 for m, _ in api.requests if m == "WATCH") - before
    finally:
        p.stop(2.0)
    assert watches <= 10, f"{watches} watches in 2 s"


def test_a_restart_adopts_an_intact_pool_and_its_stop_deletes_it_without_a_list(api: ApiStandin) -> None:
    first = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE)
    first.reconcile(DGX1)
    restarted = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE)
    restarted.start()
    restarted.request(DGX1)
    assert restarted.wait_synced(10.0) and restarted.generation == 1  # nothing rewritten
    count = len(api.requests)
    assert restarted.stop(WAIT_S)
    assert api.pool(DRIVER, NODE) == []
    assert [m for m, _ in api.requests[count:] if m != "WATCH"] == ["DELETE"]


def test_a_refused_watch_is_one_warning_and_a_wipe_is_still_repaired_by_listing(
    api: ApiStandin, caplog: pytest.LogCaptureFixture
) -> None:
    """RBAC without the `watch` verb: said once, clearly; the relists after each refusal still repair."""
    api.watch_status = 403
    p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE, backoff_max_s=0.5)
    with caplog.at_level(logging.INFO, logger="device_plugin.dra_helper.api.slice_watch"):
        p.start()
        p.request(DGX1)
        try:
            assert p.wait_synced(10.0)
            wait_until(lambda: sum(1 for m, _ in api.requests if m == "WATCH") >= 3)
            api.wipe_node(NODE)
            wait_until(lambda: len(_devices(api)) == len(DGX1))
        finally:
            p.stop(2.0)
    # the watch's own lines: a publisher write the loaded stand-in drops is retried with a warning of its own
    warnings = [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name.endswith(".slice_watch")
    ]
    assert len(warnings) == 1 and "403" in warnings[0] and "watch" in warnings[0], warnings


@pytest.mark.parametrize(
    ("event_of", "ours"),
    [("our-first-write", True), ("our-second-write", True), ("someone-else-writing-our-first-content", False)],
    ids=["late-event-of-an-earlier-write-is-ours", "event-of-the-latest-write-is-ours", "a-foreign-revert-is-not"],
)
def test_a_late_event_of_an_earlier_write_of_ours_is_still_ours(api: ApiStandin, event_of: str, ours: bool) -> None:
    """Under load the watch can report our first write of a slice after we wrote it again: its content no
    longer matches what we remember, but its resourceVersion is one of ours. Someone else writing the
    same content gets a new resourceVersion, and is not ours."""
    store = SliceStore(api.transport(), driver_name=DRIVER, node_name=NODE)
    (first,) = build_slices(DGX1, node_name=NODE, driver_name=DRIVER, generation=1)
    (second,) = build_slices(DGX1[:4], node_name=NODE, driver_name=DRIVER, generation=2)
    name = first["metadata"]["name"]
    store.write("v1", first, None)
    as_first = store.get("v1", name)
    store.write("v1", second, as_first)
    assert as_first is not None
    event = {
        "our-first-write": as_first,
        "our-second-write": store.get("v1", name),
        "someone-else-writing-our-first-content": {
            **as_first,
            "metadata": {**as_first["metadata"], "resourceVersion": "999999"},
        },
    }[event_of]
    assert store.was_ours("MODIFIED", event) is ours
