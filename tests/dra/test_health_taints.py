"""Unhealthy GPUs as device taints (KEP-5055): which taint, how slices carry it, and what the scheduler sees.

The keys are NVIDIA's where the meaning is NVIDIA's (a fatal Xid, a lost GPU), ours otherwise; the effect is
NoSchedule, never NoExecute. Tainted slices are valid for every Kubernetes release whose schema has taints
(1.34-1.37 for v1), hold at most 64 devices and share one pool generation. Where the API server drops
taints, the devices leave the pool instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import kubernetes_validate
import pytest

from device_plugin.core.devices import Health
from device_plugin.dra.inventory import DraDevice
from device_plugin.dra.taints import taint_for
from device_plugin.dra_helper.api.devices import DeviceTaint
from device_plugin.dra_helper.api.publisher import SlicePublisher
from device_plugin.dra_helper.api.slices import build_slices
from device_plugin.health.state import HealthCause, HealthTransition
from testbed.api_standin import ApiStandin
from testbed.scheduler_view import schedulable, taints_of
from tests.dra.machine_devices import devices_of

NOW_S = 1_790_000_000.0  # 2026-09-21T14:13:20Z
ADDED = "2026-09-21T14:13:20Z"


def down(cause: HealthCause | None, xid: int | None = None) -> HealthTransition:
    return HealthTransition(3, Health.HEALTHY, Health.UNHEALTHY, "why", 1.0, xid, cause)


TAINTS = {
    # id: (transition, own domain, (key, value, effect))
    "fatal-xid-is-nvidias-xid-key": (down(HealthCause.XID, 79), "a.io", ("gpu.nvidia.com/xid", "79", "NoSchedule")),
    "lost-gpu-is-nvidias-gpu-lost-key": (down(HealthCause.LOST), "a.io", ("gpu.nvidia.com/gpu-lost", "", "NoSchedule")),
    "double-bit-ecc-is-ours": (
        down(HealthCause.DOUBLE_BIT_ECC),
        "a.io",
        ("a.io/unhealthy", "double-bit-ecc", "NoSchedule"),
    ),
    "failed-probe-is-ours": (down(HealthCause.PROBE_FAILED), "a.io", ("a.io/unhealthy", "probe-failed", "NoSchedule")),
    # NVIDIA's `unmonitored` is informational (None); ours fails closed, so it is not NVIDIA's meaning.
    "unwatched-gpu-is-ours-and-blocks": (
        down(HealthCause.WATCH_FAILED),
        "b.example.org",
        ("b.example.org/unhealthy", "health-unwatched", "NoSchedule"),
    ),
    "cause-not-said-is-ours": (down(None), "a.io", ("a.io/unhealthy", "unhealthy", "NoSchedule")),
}


@pytest.mark.parametrize("case", TAINTS.values(), ids=TAINTS.keys())
def test_each_cause_gets_its_taint_key_value_and_effect(
    case: tuple[HealthTransition, str, tuple[str, str, str]],
) -> None:
    transition, domain, expected = case
    taint = taint_for(transition, own_domain=domain, now_unix_s=NOW_S)
    assert (taint.key, taint.value, taint.effect) == expected
    assert taint.time_added == ADDED and taint.blocks_scheduling


def test_no_cause_ever_evicts() -> None:
    effects = {taint_for(down(c, 79), now_unix_s=NOW_S).effect for c in [*HealthCause, None]}
    assert "NoExecute" not in effects


def tainted(devices: list[DraDevice], gpus: set[int]) -> list[DraDevice]:
    taint = DeviceTaint("gpu.nvidia.com/xid", "79", "NoSchedule", ADDED)
    return [replace(d, taints=(taint,)) if d.gpu_index in gpus else d for d in devices]


RELEASES = {"v1": ("1.34", "1.35", "1.36", "1.37"), "v1beta2": ("1.33",), "v1beta1": ("1.33",)}


@pytest.mark.parametrize(
    ("version", "release"), [(v, r) for v, rs in RELEASES.items() for r in rs], ids=lambda x: str(x)
)
def test_tainted_slices_are_valid_for_every_release_whose_schema_has_taints(version: str, release: str) -> None:
    devices, _ = devices_of("dgx1-v100")
    slices = build_slices(tainted(devices, {3}), node_name="n", driver_name="d.io", generation=1, api_version=version)
    for obj in slices:
        kubernetes_validate.validate(obj, release, strict=True)
    assert taints_of(slices) == {
        "gpu-3": [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule", "timeAdded": ADDED}]
    }


def many(count: int) -> list[DraDevice]:
    base = DraDevice("gpu-0", "GPU-0", 0, (("type", "string", "gpu"),), (("memory", "1Gi"),))
    return [replace(base, name=f"gpu-{i}", uuid=f"GPU-{i}", gpu_index=i) for i in range(count)]


SIZES = {
    # id: (devices, tainted GPUs, slice sizes)
    "healthy-pool-keeps-128-a-slice": (200, set(), [128, 72]),
    "one-taint-caps-every-slice-at-64": (200, {150}, [64, 64, 64, 8]),
    "exactly-64-tainted-is-one-slice": (64, {0}, [64]),
}


@pytest.mark.parametrize("case", SIZES.values(), ids=SIZES.keys())
def test_a_pool_with_taints_holds_at_most_64_devices_a_slice_in_one_generation(
    case: tuple[int, set[int], list[int]],
) -> None:
    count, sick, sizes = case
    slices = build_slices(tainted(many(count), sick), node_name="n", driver_name="d.io", generation=7)
    assert [len(s["spec"]["devices"]) for s in slices] == sizes
    assert {s["spec"]["pool"]["generation"] for s in slices} == {7}
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {len(sizes)}
    assert [n for s in slices for n in (d["name"] for d in s["spec"]["devices"])] == [f"gpu-{i}" for i in range(count)]


def test_where_taints_are_not_kept_the_tainted_devices_leave_the_pool() -> None:
    devices, _ = devices_of("dgx1-v100")
    slices = build_slices(tainted(devices, {3, 5}), node_name="n", driver_name="d.io", generation=1, taints_kept=False)
    names = [d["name"] for s in slices for d in s["spec"]["devices"]]
    assert sorted(names) == sorted(d.name for d in devices if d.gpu_index not in {3, 5})
    assert taints_of(slices) == {}


def test_an_informational_taint_keeps_the_device_where_taints_are_not_kept() -> None:
    """Effect None blocks nothing: dropping the taint must not drop the device."""
    devices = many(2)
    info = DeviceTaint("a.io/note", "x", "None", ADDED)
    slices = build_slices(
        [replace(devices[0], taints=(info,)), devices[1]],
        node_name="n",
        driver_name="d.io",
        generation=1,
        taints_kept=False,
    )
    assert schedulable(slices) == ["gpu-0", "gpu-1"]


@pytest.fixture
def api() -> Iterator[ApiStandin]:
    standin = ApiStandin().up()
    standin.add_node("n")
    yield standin
    standin.down()


def test_a_large_pool_republished_with_a_taint_fits_the_servers_limit_and_back_without(api: ApiStandin) -> None:
    """112 devices (16 GPUs of 7 MIG devices): one slice of 112 while healthy; a taint splits it into slices
    of at most 64, one generation, which the API server (its 64-device rule) accepts; recovery joins them."""
    devices = [replace(d, gpu_index=i // 7) for i, d in enumerate(many(112))]
    publisher = SlicePublisher(api.transport(), driver_name="d.io", node_name="n")
    publisher.reconcile(devices)
    assert [len(s["spec"]["devices"]) for s in api.pool("d.io", "n")] == [112]
    publisher.reconcile(tainted(devices, {9}))
    pool = api.pool("d.io", "n")
    assert [len(s["spec"]["devices"]) for s in pool] == [64, 48] and len({_generation(s) for s in pool}) == 1
    assert sorted(taints_of(pool)) == sorted(f"gpu-{i}" for i in range(63, 70))
    publisher.reconcile(devices)
    assert [len(s["spec"]["devices"]) for s in api.pool("d.io", "n")] == [112] and api.invalid == []


def test_the_api_stand_in_refuses_a_tainted_slice_of_65_devices(api: ApiStandin) -> None:
    """The rule the test above relies on is enforced: a 65-device slice with a taint is a 422."""
    (obj,) = build_slices(many(65), node_name="n", driver_name="d.io", generation=1)
    obj["spec"]["devices"][0]["taints"] = [{"key": "a.io/x", "effect": "NoSchedule"}]
    status, _ = api.handle("POST", "/apis/resource.k8s.io/v1/resourceslices", {}, obj)
    assert status == 422 and "at most 64 devices" in api.invalid[-1]


def _generation(obj: dict[str, Any]) -> int:
    return int(obj["spec"]["pool"]["generation"])
