"""ValidatedRequest: built only by the one validation, canonical order whatever the kubelet's order."""

from __future__ import annotations

import pytest

from device_plugin.allocation.request import ValidatedRequest
from device_plugin.core.devices import Device
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
