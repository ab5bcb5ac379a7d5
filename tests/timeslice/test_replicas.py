"""share_resources: replicas, rename, devices selection, MIG resources, and the refusals."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from device_plugin.core.errors import ConfigError
from device_plugin.core.ids import parse_device_id
from device_plugin.timeslice.replicas import MAX_DEVICE_ID_LENGTH, share_resource, share_resources
from tests.timeslice.node import SERVER_8, base_devices, mig_devices
from tests.timeslice.parsed import parse_sharing

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"
TS = "sharing.timeSlicing"


def config(*resources: dict[str, Any], **top: Any) -> Any:
    return parse_sharing({"timeSlicing": {"resources": list(resources), **top}}, gpus=SERVER_8)


def gpus_of(devices: Any) -> list[int]:
    return sorted({d.gpu_indices[0] for d in devices})


BASE = {GPU: base_devices(SERVER_8)}


def test_no_config_advertises_base_unchanged() -> None:
    advertised = share_resources(BASE, None)
    assert dict(advertised.devices) == {GPU: BASE[GPU]}
    assert not advertised.shared


def test_all_gpus_shared_under_the_original_name() -> None:
    advertised = share_resources(BASE, config({"name": GPU, "replicas": 4}))
    devices = advertised.devices[GPU]
    assert len(devices) == 8 * 4
    assert devices[0].id == f"{SERVER_8[0].uuid}::0"
    assert all(d.numa_node == SERVER_8[d.gpu_indices[0]].numa_node for d in devices)
    assert {d.numa_node for d in devices} == {0, 1}
    shared = advertised.shared[GPU]
    assert (shared.source_name, shared.replicas, len(shared.base_ids)) == (GPU, 4, 8)


def test_rename_by_default_moves_every_gpu() -> None:
    advertised = share_resources(BASE, config({"name": GPU, "replicas": 2}, renameByDefault=True))
    assert list(advertised.devices) == ["nvidia.com/gpu.shared"]  # nvidia.com/gpu has nothing left
    assert len(advertised.devices["nvidia.com/gpu.shared"]) == 16


SELECTIONS = [
    ("list-of-indices", [0, 5], [0, 5]),
    ("list-of-uuids", [SERVER_8[7].uuid, SERVER_8[2].uuid], [2, 7]),
    ("count-takes-lowest-indices", 3, [0, 1, 2]),
    ("all", "all", list(range(8))),
]


@pytest.mark.parametrize(("devices", "shared_gpus"), [c[1:] for c in SELECTIONS], ids=[c[0] for c in SELECTIONS])
def test_devices_selects_and_rename_keeps_the_rest_whole(devices: Any, shared_gpus: list[int]) -> None:
    advertised = share_resources(BASE, config({"name": GPU, "replicas": 3, "rename": "gpu-small", "devices": devices}))
    small = advertised.devices["nvidia.com/gpu-small"]
    assert gpus_of(small) == shared_gpus
    assert len(small) == 3 * len(shared_gpus)
    whole = advertised.devices.get(GPU, ())
    assert gpus_of(whole) == [i for i in range(8) if i not in shared_gpus]
    assert all(parse_device_id(d.id).replica is None for d in whole)


def test_two_entries_split_one_resource() -> None:
    advertised = share_resources(
        BASE,
        config(
            {"name": GPU, "replicas": 4, "rename": "gpu-quarter", "devices": [0, 1]},
            {"name": GPU, "replicas": 2, "rename": "gpu-half", "devices": [2, 3]},
        ),
    )
    assert list(advertised.devices) == [GPU, "nvidia.com/gpu-half", "nvidia.com/gpu-quarter"]
    assert gpus_of(advertised.devices[GPU]) == [4, 5, 6, 7]
    assert len(advertised.devices["nvidia.com/gpu-quarter"]) == 8
    assert len(advertised.devices["nvidia.com/gpu-half"]) == 4


REFUSED = [
    (
        "partial-share-without-rename-mixes",
        ({"name": GPU, "replicas": 2, "devices": [4]},),
        f"{TS}.resources[0].name",
    ),
    (
        "overlapping-entries",
        (
            {"name": GPU, "replicas": 2, "rename": "a", "devices": [4, 5]},
            {"name": GPU, "replicas": 2, "rename": "b", "devices": [5]},
        ),
        f"{TS}.resources[1].devices",
    ),
    (
        "count-beyond-node",
        ({"name": GPU, "replicas": 2, "devices": 5},),
        f"{TS}.resources[0].devices",
    ),
    (
        "rename-onto-existing-resource",
        ({"name": GPU, "replicas": 2, "devices": [4], "rename": MIG},),
        f"{TS}.resources[0].rename",
    ),
    (
        "mig-uuid-not-on-node",
        ({"name": MIG, "replicas": 2, "devices": ["MIG-missing"]},),
        f"{TS}.resources[0].devices[0]",
    ),
    (
        "gpu-without-mig-devices",
        ({"name": MIG, "replicas": 2, "devices": [7]},),
        f"{TS}.resources[0].devices[0]",
    ),
    (
        "selection-for-absent-resource",
        ({"name": "nvidia.com/mig-3g.40gb", "replicas": 2, "devices": [0]},),
        f"{TS}.resources[0].devices",
    ),
]


@pytest.mark.parametrize(("entries", "field"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refusals_name_the_field(entries: tuple[dict[str, Any], ...], field: str) -> None:
    base = {GPU: base_devices(SERVER_8[4:]), MIG: mig_devices(SERVER_8[0], 3) + mig_devices(SERVER_8[1], 3)}
    with pytest.raises(ConfigError) as caught:
        share_resources(base, config(*entries))
    assert caught.value.field == field


@pytest.mark.parametrize("base", [BASE, {**BASE, MIG: ()}], ids=["resource-absent", "resource-empty"])
def test_entry_for_absent_resource_with_all_is_reported_not_fatal(base: dict[str, Any]) -> None:
    advertised = share_resources(base, config({"name": MIG, "replicas": 2}))
    assert advertised.unmatched == (f"{TS}.resources[0]",)
    assert dict(advertised.devices) == {GPU: BASE[GPU]}


def test_shared_mig_resource_by_gpu_index_and_mig_uuid() -> None:
    on_gpu0 = mig_devices(SERVER_8[0], 3)
    on_gpu1 = mig_devices(SERVER_8[1], 3)
    base = {GPU: base_devices(SERVER_8[2:]), MIG: on_gpu0 + on_gpu1}
    advertised = share_resources(
        base, config({"name": MIG, "replicas": 2, "devices": [0, on_gpu1[2].id]}, renameByDefault=True)
    )
    shared = advertised.devices[f"{MIG}.shared"]
    assert sorted({parse_device_id(d.id).base for d in shared}) == sorted([*(d.id for d in on_gpu0), on_gpu1[2].id])
    assert len(shared) == 4 * 2
    assert all(d.gpu_indices == (0,) for d in shared if parse_device_id(d.id).base in {m.id for m in on_gpu0})
    assert [d.id for d in advertised.devices[MIG]] == [on_gpu1[0].id, on_gpu1[1].id]
    assert advertised.devices[GPU] == base[GPU]


def test_share_resource_single() -> None:
    devices = share_resource(GPU, BASE[GPU], config({"name": GPU, "replicas": 2}))
    assert list(devices) == [GPU]
    assert len(devices[GPU]) == 16


def test_replica_ids_fit_the_kubelet_limit() -> None:
    advertised = share_resources(BASE, config({"name": GPU, "replicas": 1024}))
    assert max(len(d.id) for d in advertised.devices[GPU]) <= MAX_DEVICE_ID_LENGTH


def test_base_holding_replicas_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="already holds replicas"):
        share_resources({GPU: share_resource(GPU, BASE[GPU], config({"name": GPU, "replicas": 2}))[GPU]}, None)


UNSERVED = [
    ("a-typo-gets-a-guess", "nvidia.com/gpus", "did you mean nvidia.com/gpu?"),
    ("nothing-close-lists-what-is-served", "nvidia.com/mig-3g.40gb", "it serves nvidia.com/gpu"),
]


@pytest.mark.parametrize(("name", "words"), [c[1:] for c in UNSERVED], ids=[c[0] for c in UNSERVED])
def test_an_entry_for_a_resource_the_node_does_not_serve_warns_and_shares_nothing(
    name: str, words: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 32 item 6: one INFO line was all, and the node silently stayed unshared."""
    with caplog.at_level(logging.INFO, logger="timeslice.replicas"):
        advertised = share_resources(BASE, config({"name": name, "replicas": 2}))
    assert advertised.shared == share_resources(BASE, None).shared == {}
    assert advertised.unmatched == ("sharing.timeSlicing.resources[0]",)
    (record,) = [r for r in caplog.records if "nothing is shared" in r.getMessage()]
    assert record.levelno == logging.WARNING and words in record.getMessage()
    assert "sharing.timeSlicing.resources[0]" in record.getMessage()
