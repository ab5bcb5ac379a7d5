"""Allocate for replicas: failRequestsGreaterThanOne, requireDistinctGPUs, each GPU named once."""

from __future__ import annotations

from typing import Any

import pytest

from device_plugin.allocation.protocols import VISIBLE_DEVICES_ENV
from device_plugin.allocation.resources import ResourceManager
from device_plugin.core.errors import InvalidRequestError
from device_plugin.timeslice.policy import ReplicaPolicy
from device_plugin.timeslice.replicas import share_resources
from device_plugin.timeslice.response import ReplicaResponseBuilder
from testbed.allocation_doubles import EnvVarResponseBuilder
from tests.timeslice.node import SERVER_8, base_devices
from tests.timeslice.parsed import parse_sharing

GPU = "nvidia.com/gpu"
U0, U1 = SERVER_8[0].uuid, SERVER_8[1].uuid


def manager(**top: Any) -> ResourceManager:
    raw = {"timeSlicing": {"resources": [{"name": GPU, "replicas": 4}], **top}}
    advertised = share_resources({GPU: base_devices(SERVER_8)}, parse_sharing(raw, gpus=SERVER_8))
    shared = advertised.shared[GPU]
    return ResourceManager(
        GPU,
        advertised.devices[GPU],
        ReplicaPolicy.for_resource(shared),
        ReplicaResponseBuilder.for_resource(shared, EnvVarResponseBuilder()),
    )


ALLOWED = [
    ("one-replica", {}, [f"{U0}::2"], f"{U0}"),
    ("two-replicas-one-gpu-named-once", {}, [f"{U0}::0", f"{U0}::3"], f"{U0}"),
    ("two-gpus-in-index-order", {}, [f"{U1}::0", f"{U0}::1"], f"{U0},{U1}"),
    ("distinct-two-gpus", {"requireDistinctGPUs": True}, [f"{U0}::0", f"{U1}::0"], f"{U0},{U1}"),
    ("fail-gt-one-single", {"failRequestsGreaterThanOne": True}, [f"{U1}::1"], f"{U1}"),
]


@pytest.mark.parametrize(("top", "ids", "visible"), [c[1:] for c in ALLOWED], ids=[c[0] for c in ALLOWED])
def test_visible_devices_names_each_gpu_once(top: dict[str, Any], ids: list[str], visible: str) -> None:
    allocation = manager(**top).allocate(ids)
    assert allocation.envs[VISIBLE_DEVICES_ENV] == visible


REFUSED = [
    (
        "fail-gt-one-two-gpus",
        {"failRequestsGreaterThanOne": True},
        [f"{U0}::0", f"{U1}::0"],
        r"failRequestsGreaterThanOne is set.*at most 1 replica.*requested 2",
    ),
    (
        "fail-gt-one-same-gpu",
        {"failRequestsGreaterThanOne": True},
        [f"{U0}::0", f"{U0}::1"],
        "failRequestsGreaterThanOne",
    ),
    (
        "distinct-same-gpu",
        {"requireDistinctGPUs": True},
        [f"{U0}::0", f"{U0}::1", f"{U1}::2"],
        rf"requireDistinctGPUs is set.*{U0}::0, {U0}::1 are all on {U0}",
    ),
]


@pytest.mark.parametrize(("top", "ids", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_with_a_clear_message(top: dict[str, Any], ids: list[str], message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message) as caught:
        manager(**top).allocate(ids)
    assert str(caught.value).startswith(f"{GPU}: ")


def test_preferred_allocation_then_allocate_with_distinctness() -> None:
    gpu = manager(requireDistinctGPUs=True)
    everything = [d.id for d in gpu.snapshot().devices]
    chosen = gpu.preferred_allocation(everything, [], 3)
    allocation = gpu.allocate(list(chosen))
    assert len(allocation.envs[VISIBLE_DEVICES_ENV].split(",")) == 3
