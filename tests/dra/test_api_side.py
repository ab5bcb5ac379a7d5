"""The API side through the real `kubernetes` client against the API stand-in: slices, versions, claims, faults."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.dra.inventory import DraDevice, build_devices
from device_plugin.dra_helper.api.api_errors import ApiError, ApiUnreachable, is_transient
from device_plugin.dra_helper.api.kube import UnsupportedApiError
from device_plugin.dra_helper.api.publisher import SlicePublisher
from device_plugin.dra_helper.api.slices import slice_name
from device_plugin.nvml.fake.machine import FakeNvml
from testbed.api_standin import ApiStandin
from tests.allocation.machines import topology_of

DRIVER, NODE = DEFAULT_DRA_DRIVER_NAME, "node-a"  # the default driver name
FIRST_SLICE = slice_name(NODE, DRIVER, 0)
DGX1 = build_devices(FakeNvml.from_machine("dgx1-v100"), topology_of("dgx1-v100"))[0]


def many(count: int) -> tuple[DraDevice, ...]:
    """`count` distinct devices shaped like a DGX-1 GPU (to cross the 128-devices-per-slice limit)."""
    return tuple(replace(DGX1[i % len(DGX1)], name=f"gpu-{i}") for i in range(count))


@pytest.fixture
def api() -> Iterator[ApiStandin]:
    standin = ApiStandin().up()
    standin.add_node(NODE)
    yield standin
    standin.down()
    assert standin.invalid == []  # every object we sent was valid for its Kubernetes release


def publisher(api: ApiStandin, **kwargs: float) -> SlicePublisher:
    return SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE, **kwargs)


def wait_for_error(p: SlicePublisher, timeout_s: float = 10.0) -> bool:
    """Until the publisher's first attempt has failed: a bound for a loaded machine, not a timing claim."""
    deadline = time.monotonic() + timeout_s
    while not p.error and time.monotonic() < deadline:
        time.sleep(0.02)
    return p.error != ""


def writes(api: ApiStandin) -> list[str]:
    return [m for m, p in api.requests if m in ("POST", "PUT", "DELETE") and "resourceslices" in p]


@pytest.mark.parametrize(
    ("served", "chosen"),
    [(("v1", "v1beta2", "v1beta1"), "v1"), (("v1beta2", "v1beta1"), "v1beta2"), (("v1beta1",), "v1beta1")],
    ids=["1.34-uses-v1", "1.33-uses-v1beta2", "1.32-uses-v1beta1"],
)
def test_the_pool_is_published_in_the_newest_served_version_owned_by_the_node(
    api: ApiStandin, served: tuple[str, ...], chosen: str
) -> None:
    api.versions = served
    p = publisher(api)
    assert p.reconcile(DGX1) == 1
    (obj,) = api.pool(DRIVER, NODE)
    assert obj["apiVersion"] == f"resource.k8s.io/{chosen}"
    assert obj["metadata"]["ownerReferences"][0]["uid"] == api.nodes[NODE]["metadata"]["uid"]
    assert [d["name"] for d in obj["spec"]["devices"]] == [d.name for d in DGX1]
    assert obj["spec"]["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}


def test_a_server_without_a_usable_version_is_refused_naming_what_it_serves(api: ApiStandin) -> None:
    api.versions = ("v1alpha3",)
    with pytest.raises(UnsupportedApiError, match=r"serves resource.k8s.io versions \['v1alpha3'\]"):
        publisher(api).reconcile(DGX1)
    p = publisher(api)
    p.start()
    p.request(DGX1)
    assert wait_for_error(p) and "Kubernetes >= 1.32" in p.error and not p.wait_synced(0.0)
    p.stop()
    assert writes(api) == []


def test_more_than_128_devices_split_into_slices_of_one_generation_and_shrinking_deletes_the_rest(
    api: ApiStandin,
) -> None:
    p = publisher(api)
    p.reconcile(many(300))
    pool = api.pool(DRIVER, NODE)
    assert [len(o["spec"]["devices"]) for o in pool] == [128, 128, 44]
    assert {(o["spec"]["pool"]["generation"], o["spec"]["pool"]["resourceSliceCount"]) for o in pool} == {(1, 3)}
    p.reconcile(many(100))
    pool = api.pool(DRIVER, NODE)
    assert [len(o["spec"]["devices"]) for o in pool] == [100]
    assert pool[0]["spec"]["pool"] == {"name": NODE, "generation": 2, "resourceSliceCount": 1}


def test_the_generation_is_bumped_on_every_change_and_nothing_is_written_without_one(api: ApiStandin) -> None:
    p = publisher(api)
    generations = [p.reconcile(devices) for devices in (DGX1, DGX1, DGX1[1:], DGX1[1:], DGX1)]
    assert generations == [1, 1, 2, 2, 3]
    assert writes(api) == ["POST", "PUT", "PUT"]


def test_stale_slices_of_ours_go_and_other_drivers_slices_stay(api: ApiStandin) -> None:
    p = publisher(api)
    p.reconcile(many(200))
    foreign = dict(api.slices[FIRST_SLICE], metadata={"name": "nic-slice", "resourceVersion": "1"})
    api.slices["nic-slice"] = {**foreign, "spec": {**foreign["spec"], "driver": "nic.example.com"}}
    restarted = publisher(api)  # an earlier run left 2 slices; this one has fewer devices
    assert restarted.reconcile(DGX1) == 2  # the generation continues above what the server holds
    assert sorted(api.slices) == ["nic-slice", FIRST_SLICE]


def test_a_conflict_on_update_rereads_and_updates_again(api: ApiStandin) -> None:
    p = publisher(api)
    p.reconcile(DGX1)
    api.race_next_put(FIRST_SLICE)
    api.requests.clear()
    assert p.reconcile(DGX1[2:]) == 2
    assert [m for m, _ in api.requests] == ["GET", "PUT", "GET", "PUT", "GET"]  # list, 409, re-read, update, read back
    assert [d["name"] for d in api.pool(DRIVER, NODE)[0]["spec"]["devices"]] == [d.name for d in DGX1[2:]]


def test_the_api_server_down_at_start_is_retried_with_backoff_then_published(api: ApiStandin) -> None:
    api.down()
    p = publisher(api, backoff_initial_s=0.05, backoff_max_s=0.2)
    p.start()
    p.request(DGX1)
    assert wait_for_error(p) and "Cannot connect" in p.error and not p.wait_synced(0.0)
    api.up()
    assert p.wait_synced(10.0) and p.error == ""
    assert len(api.pool(DRIVER, NODE)[0]["spec"]["devices"]) == len(DGX1)
    p.stop()
    assert api.pool(DRIVER, NODE) == []  # clean shutdown removes our slices


def test_server_errors_are_retried_and_the_newest_devices_win(api: ApiStandin) -> None:
    p = publisher(api, backoff_initial_s=0.05, backoff_max_s=0.1)
    api.fail_next(3, 500)
    p.start()
    p.request(DGX1)
    p.request(DGX1[:4])  # arrives while the first is failing: only the newest is published
    assert p.wait_synced(10.0)
    assert [d["name"] for d in api.pool(DRIVER, NODE)[0]["spec"]["devices"]] == [d.name for d in DGX1[:4]]
    p.stop(unpublish=False)


def test_a_resync_after_the_kubelet_wiped_the_slices_publishes_them_again(api: ApiStandin) -> None:
    p = publisher(api)
    p.start()
    p.request(DGX1)
    assert p.wait_synced(5.0)
    api.slices.clear()  # what the kubelet does at its start
    p.resync()
    assert p.wait_synced(5.0) and len(api.pool(DRIVER, NODE)) == 1
    p.stop()


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ApiError(503, "Service Unavailable"), True),
        (ApiError(429, "Too Many Requests"), True),
        (ApiError(422, "Unprocessable Entity"), False),
        (ApiUnreachable("ClientConnectorError: connection refused"), True),
        (ConnectionRefusedError(111, "refused"), True),
        (RuntimeError("ResourceSlice x: still conflicting after 5 attempts"), False),
        (ValueError("device name 'GPU_0' is not a DNS label"), False),
    ],
    ids=["5xx", "429", "invalid", "no-answer", "os-error", "conflict-loop", "our-bug"],
)
def test_only_server_and_network_failures_are_called_transient(error: Exception, transient: bool) -> None:
    """A bug of ours or a conflict loop is logged as an error, not as "API server unavailable"."""
    assert is_transient(error) is transient
