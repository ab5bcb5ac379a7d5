"""Memory shares (gpuDevicePlugin.memoryShares): what a node publishes, what a Prepare makes of a share, the
refusals where the node publishes none, and the share's ID in the kubelet's answer over a real socket."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from device_plugin.dra.inventory import build_devices
from device_plugin.dra.memory_shares import share_listing, shareable, shareable_memory
from device_plugin.dra_helper.api.slices import build_slices
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.checkpoint.values import Share
from device_plugin.nvml.fake.machine import FakeNvml
from tests.allocation.machines import topology_of
from tests.dra.test_kubelet_side import DRIVER, NODE, Driver, driver, kubelet  # noqa: F401 (the fixture)

OWN = "gpu-device-plugin.io"


def devices_of(machine: str, shares: bool) -> tuple[Any, ...]:
    built, _ = build_devices(FakeNvml.from_machine(machine), topology_of(machine))
    return shareable(built, OWN) if shares else built


def published(machine: str) -> list[dict[str, Any]]:
    (obj,) = build_slices(devices_of(machine, True), node_name=NODE, driver_name=DRIVER, generation=1)
    devices: list[dict[str, Any]] = obj["spec"]["devices"]
    return devices


def test_every_whole_gpu_is_shareable_by_memory_and_says_its_isolation() -> None:
    for device in published("hgx-h100"):
        memory = device["capacity"]["memory"]
        assert device["allowMultipleAllocations"] is True
        assert memory == {
            "value": "81559Mi",
            "requestPolicy": {"default": "81559Mi", "validRange": {"min": "1Gi", "step": "1Mi"}},
        }  # a claim that asks no memory is charged all of it: the GPU stays whole
        assert device["attributes"][f"{OWN}/memoryIsolation"] == {"string": "none"}


def test_mig_devices_are_never_shared_and_whole_gpus_beside_them_are() -> None:
    devices = published("h100-mig-mixed")
    mig = [d for d in devices if d["attributes"]["type"] == {"string": "mig"}]
    whole = [d for d in devices if d["attributes"]["type"] == {"string": "gpu"}]
    assert mig and whole
    assert not any("allowMultipleAllocations" in d or "requestPolicy" in d["capacity"]["memory"] for d in mig)
    assert all(d["allowMultipleAllocations"] for d in whole)


def test_without_the_setting_nothing_is_shareable() -> None:
    (obj,) = build_slices(devices_of("hgx-h100", False), node_name=NODE, driver_name=DRIVER, generation=1)
    assert not any("allowMultipleAllocations" in d for d in obj["spec"]["devices"])
    assert shareable_memory(devices_of("hgx-h100", False)) == {}
    assert set(shareable_memory(devices_of("hgx-h100", True)).values()) == {81559}


@pytest.fixture
def shared_driver(driver: Driver) -> Iterator[Driver]:  # noqa: F811 (the fixture imported above)
    uuids = {d.name: d.uuid for d in devices_of("dgx1-v100", True)}
    driver.decision.see(uuids, frozenset(), shareable_memory(devices_of("dgx1-v100", True)))
    yield driver


def share_result(device: str, share_id: str, memory: str | None, request: str = "gpu") -> dict[str, Any]:
    result: dict[str, Any] = {"request": request, "driver": DRIVER, "pool": NODE, "device": device, "shareID": share_id}
    if memory is not None:
        result["consumedCapacity"] = {"memory": memory}
    return result


def test_each_share_is_answered_with_its_id_and_recorded_with_its_size(shared_driver: Driver) -> None:
    k = kubelet(shared_driver)
    plugin = k.wait_for_plugin()
    store = shared_driver.store
    claims = []
    for n in range(2):
        store.claims[("ns", f"c{n}")] = allocated(f"c{n}", f"uid-{n}", [share_result("gpu-0", f"s-{n}", "16Gi")])
        claims.append(("ns", f"uid-{n}", f"c{n}"))
    answers = k.prepare(plugin, claims)
    assert {uid: (a.error, [d.share_id for d in a.devices]) for uid, a in answers.items()} == {
        "uid-0": ("", ["s-0"]),
        "uid-1": ("", ["s-1"]),
    }
    assert shared_driver.preparer is not None
    holders = shared_driver.preparer.holders
    assert holders.holders("gpu-0") == ("uid-0", "uid-1")
    (device,) = Checkpoint(shared_driver.checkpoint_path).get("uid-0").devices  # type: ignore[union-attr]
    assert device.share == Share("s-0", 16384, 32768)
    # a third share does not fit 32 GiB beside the two: the node refuses what the scheduler should never do
    store.claims[("ns", "c2")] = allocated("c2", "uid-2", [share_result("gpu-0", "s-2", "1Gi")])
    refused = k.prepare(plugin, [("ns", "uid-2", "c2")])["uid-2"].error
    assert "has 32768 of 32768 MiB prepared as 2 other shares; this share of 1024 MiB" in refused


def allocated(name: str, uid: str, results: list[dict[str, Any]], requests: list[Any] | None = None) -> dict[str, Any]:
    from device_plugin.standins.api_objects import allocated_claim

    body = allocated_claim("ns", name, uid, results)
    if requests is not None:
        body["spec"] = {"devices": {"requests": requests}}
    return body


ASK_20GI = {
    "name": "gpu",
    "exactly": {"deviceClassName": "c", "count": 1, "capacity": {"requests": {"memory": "20Gi"}}},
}
ASK_IN_ALTERNATIVE = {
    "name": "gpu",
    "firstAvailable": [{"name": "small", "deviceClassName": "c", "capacity": {"requests": {"memory": "8Gi"}}}],
}
OFF = "is not published as shareable (gpuDevicePlugin.memoryShares is off, or it is a MIG device)"
REFUSED_WHERE_OFF = [
    pytest.param(
        [share_result("gpu-1", "s-1", "8Gi")], None, f"allocated as a share (s-1), but it {OFF}", id="a-share-id"
    ),
    pytest.param(
        [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-1"}],
        [ASK_20GI],
        f"request gpu asks for a share (memory 20Gi) of gpu-1, which {OFF}",
        id="a-capacity-request-allocated-whole",
    ),
    pytest.param(
        [{"request": "gpu/small", "driver": DRIVER, "pool": NODE, "device": "gpu-1"}],
        [ASK_IN_ALTERNATIVE],
        f"request gpu asks for a share (memory 8Gi) of gpu-1, which {OFF}",
        id="a-capacity-request-in-a-firstAvailable-alternative",
    ),
]


@pytest.mark.parametrize(("results", "requests", "why"), REFUSED_WHERE_OFF)
def test_a_share_where_the_node_publishes_none_is_refused_never_prepared_whole(
    driver: Driver,  # noqa: F811
    results: list[dict[str, Any]],
    requests: list[Any] | None,
    why: str,
) -> None:
    k = kubelet(driver)
    plugin = k.wait_for_plugin()
    driver.store.claims[("ns", "c")] = allocated("c", "uid-1", results, requests)
    answer = k.prepare(plugin, [("ns", "uid-1", "c")])["uid-1"]
    assert why in answer.error and not answer.devices
    assert driver.checkpointed() == ()


REFUSED_SHARES = [
    pytest.param(
        share_result("gpu-0", "s-1", "33Gi"),
        "a share of 33792 MiB is larger than the device's 32768 MiB",
        id="larger-than-the-gpu",
    ),
    pytest.param(
        share_result("gpu-0", "s-1", "lots"),
        "consumedCapacity.memory: 'lots' is not a Kubernetes quantity",
        id="not-a-quantity",
    ),
    pytest.param(share_result("gpu-0", "s" * 65, "1Gi"), "is longer than a share ID can be", id="an-overlong-share-id"),
    pytest.param(
        share_result("gpu-0", "s-1", "1Gi", request="compute"),
        "request compute asks for capacity cores, which gpu-0 does not publish",
        id="a-capacity-not-published",
    ),
]
ASKS_CORES = {"name": "compute", "exactly": {"deviceClassName": "c", "capacity": {"requests": {"cores": "50"}}}}


@pytest.mark.parametrize(("result", "why"), REFUSED_SHARES)
def test_a_share_the_node_cannot_hold_is_refused_with_the_reason(shared_driver: Driver, result: Any, why: str) -> None:
    k = kubelet(shared_driver)
    plugin = k.wait_for_plugin()
    shared_driver.store.claims[("ns", "c")] = allocated("c", "uid-1", [result], [ASKS_CORES])
    answer = k.prepare(plugin, [("ns", "uid-1", "c")])["uid-1"]
    assert why in answer.error and not answer.devices


def test_a_shareable_gpu_allocated_without_a_share_id_is_held_whole(shared_driver: Driver) -> None:
    """A scheduler without consumable capacity allocates it whole: no share beside it."""
    k = kubelet(shared_driver)
    plugin = k.wait_for_plugin()
    store = shared_driver.store
    store.claims[("ns", "whole")] = allocated(
        "whole", "uid-w", [{"request": "g", "driver": DRIVER, "pool": NODE, "device": "gpu-0"}]
    )
    store.claims[("ns", "share")] = allocated("share", "uid-s", [share_result("gpu-0", "s-1", "1Gi")])
    whole, share = (k.prepare(plugin, [ref])[ref[1]] for ref in [("ns", "uid-w", "whole"), ("ns", "uid-s", "share")])
    assert whole.error == "" and not whole.devices[0].HasField("share_id")
    assert "device gpu-0 is already prepared for claim ns/whole (uid-w)" in share.error


MALFORMED = [
    pytest.param({"shareID": 7}, "shareID is 7 (int), not a non-empty string", id="a-numeric-share-id"),
    pytest.param({"consumedCapacity": ["memory"]}, "consumedCapacity is a list", id="consumed-capacity-a-list"),
    pytest.param({"consumedCapacity": {"memory": 20}}, "consumedCapacity.memory is 20 (int)", id="a-numeric-quantity"),
]


@pytest.mark.parametrize(("extra", "why"), MALFORMED)
def test_a_malformed_share_in_the_allocation_is_refused_naming_the_field(
    shared_driver: Driver, extra: dict[str, Any], why: str
) -> None:
    k = kubelet(shared_driver)
    plugin = k.wait_for_plugin()
    result = {"request": "g", "driver": DRIVER, "pool": NODE, "device": "gpu-0", **extra}
    shared_driver.store.claims[("ns", "c")] = allocated("c", "uid-1", [result])
    answer = k.prepare(plugin, [("ns", "uid-1", "c")])["uid-1"]
    assert "malformed ResourceClaim" in answer.error and why in answer.error, answer.error


def test_shares_survive_a_restart_and_still_count_against_the_gpu(shared_driver: Driver) -> None:
    k = kubelet(shared_driver)
    plugin = k.wait_for_plugin()
    store = shared_driver.store
    store.claims[("ns", "a")] = allocated("a", "uid-a", [share_result("gpu-0", "s-a", "24Gi")])
    assert k.prepare(plugin, [("ns", "uid-a", "a")])["uid-a"].error == ""
    shared_driver.stop()
    shared_driver.start()  # a new Preparer over the same checkpoint, as after a driver restart
    plugin = k.wait_for_plugin()
    again = k.prepare(plugin, [("ns", "uid-a", "a")])["uid-a"]
    assert [d.share_id for d in again.devices] == ["s-a"]  # the same answer
    store.claims[("ns", "b")] = allocated("b", "uid-b", [share_result("gpu-0", "s-b", "9Gi")])
    assert (
        "has 24576 of 32768 MiB prepared as 1 other shares" in k.prepare(plugin, [("ns", "uid-b", "b")])["uid-b"].error
    )


def test_two_shares_of_one_gpu_unprepared_at_once_leave_the_third(shared_driver: Driver) -> None:
    k = kubelet(shared_driver)
    plugin = k.wait_for_plugin()
    refs = []
    for n in range(3):
        shared_driver.store.claims[("ns", f"c{n}")] = allocated(
            f"c{n}", f"u{n}", [share_result("gpu-0", f"s{n}", "8Gi")]
        )
        refs.append(("ns", f"u{n}", f"c{n}"))
    assert all(a.error == "" for a in k.prepare(plugin, refs).values())
    with ThreadPoolExecutor(2) as pool:
        errors = list(pool.map(lambda ref: k.unprepare(plugin, [ref])[ref[1]], refs[:2]))
    assert errors == ["", ""]
    assert shared_driver.checkpointed() == ("u2",)
    assert shared_driver.preparer is not None and shared_driver.preparer.holders.holders("gpu-0") == ("u2",)


RANK = f"{OWN}/singleGPURank"


def listing(held: set[str], shared: dict[str, int]) -> list[str]:
    devices = devices_of("hgx-h100", True)
    return [d.name for d in share_listing(devices, frozenset(held), shared, RANK)]


def by_rank(names: list[str]) -> list[str]:
    ranks = {d.name: dict((n, v) for n, _, v in d.attributes)[RANK] for d in devices_of("hgx-h100", True)}
    return sorted(names, key=lambda n: ranks[n])


def test_first_fit_tries_shared_gpus_with_room_least_room_first_then_free_ones_then_the_rest() -> None:
    shared = {"gpu-3": 60 * 1024, "gpu-5": 20 * 1024, "gpu-6": 81559 - 512}  # gpu-6: less than 1 GiB left
    held = {"gpu-1", *shared}  # gpu-1 whole
    order = listing(held, shared)
    free = [n for n in order if n not in held]
    assert order == ["gpu-3", "gpu-5", *by_rank(free), *[n for n in listing(set(), {}) if n in {"gpu-1", "gpu-6"}]]


def test_with_nothing_held_the_free_gpus_go_by_single_gpu_rank() -> None:
    assert listing(set(), {}) == by_rank([f"gpu-{n}" for n in range(8)])
