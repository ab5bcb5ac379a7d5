"""The one request check: a ValidatedRequest is built only by it, in canonical order whatever the kubelet's
order; an Allocate container is refused with the field named, or comes out known, healthy and ordered."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from device_plugin.allocation.request import ValidatedRequest, validate_allocate
from device_plugin.core.devices import Device, Health
from device_plugin.core.errors import InvalidRequestError, UnhealthyDeviceError, UnknownDeviceError
from device_plugin.dp_helper.served_resource import require_containers
from tests.validated import validated

# Canonical order is by GPU index, then ID: "z" (GPU 0) sorts before "a" (GPU 1).
DEVICES = {"a": Device("a", (1,), 0), "z": Device("z", (0,), 0), "m": Device("m", (2,), 0)}


def test_a_request_cannot_be_built_without_validation() -> None:
    with pytest.raises(TypeError, match="validate_preferred"):
        ValidatedRequest("r", DEVICES, ("z",), (), 1)


@pytest.mark.parametrize(
    ("available", "must"),
    [(["m", "a", "z"], ["m", "a"]), (["a", "z", "m"], ["a", "m"]), (["z", "m", "a"], ["m", "a"])],
    ids=["reversed", "by id", "rotated"],
)
def test_ids_come_out_in_canonical_order(available: list[str], must: list[str]) -> None:
    request = validated(DEVICES, available, must, 2)
    assert (request.available, request.must_include, request.size) == (("z", "a", "m"), ("a", "m"), 2)


def test_a_validated_request_is_frozen() -> None:
    request = validated(DEVICES, ["a"], [], 1)
    with pytest.raises(AttributeError):
        request.size = 2  # type: ignore[misc]


HEALTHY_AND_NOT = {
    "a": Device("a", (1,), 0),
    "z": Device("z", (0,), 0),
    "sick": Device("sick", (2,), 0, Health.UNHEALTHY, "xid 48"),
}
RANK = {"z": 0, "a": 1, "sick": 2}


@pytest.mark.parametrize(
    ("device_ids", "error", "message"),
    [
        ([], InvalidRequestError, "devices_ids is empty"),
        (["a", "a"], InvalidRequestError, "devices_ids contains duplicates: a, a"),
        (["a", "nope"], UnknownDeviceError, "devices_ids: unknown device(s) for r: nope"),
        (["a", "sick"], UnhealthyDeviceError, "devices_ids: unhealthy device(s) for r: sick"),
    ],
    ids=["empty", "duplicate", "unknown", "unhealthy"],
)
def test_an_allocate_container_is_refused_with_the_field_named(
    device_ids: list[str], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as refused:
        validate_allocate("r", HEALTHY_AND_NOT, RANK, device_ids)
    assert str(refused.value) == message


def test_an_allocate_container_comes_out_in_canonical_order() -> None:
    checked = validate_allocate("r", HEALTHY_AND_NOT, RANK, ["a", "z"])
    assert [d.id for d in checked.devices] == ["z", "a"]


@pytest.mark.parametrize("containers", [[], ()], ids=["list", "tuple"])
def test_a_request_without_containers_is_refused(containers: Sequence[object]) -> None:
    with pytest.raises(InvalidRequestError, match="container_requests is empty"):
        require_containers(containers)
