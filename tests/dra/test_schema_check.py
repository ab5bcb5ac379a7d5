"""The API stand-in's schema check (schema_check.py: each schema loaded once) agrees with kubernetes_validate."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from device_plugin.dra_helper.api.slices import build_slices
from testbed.schema_check import validate_strict
from tests.dra.machine_devices import devices_of


def _slice(api_version: str) -> dict[str, Any]:
    devices, _ = devices_of("dgx1-v100")
    (obj,) = build_slices(devices, node_name="n", driver_name="gpu.nvidia.com", generation=1, api_version=api_version)
    return obj


def _broken(obj: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(obj)
    broken["spec"]["devices"][0].get("basic", broken["spec"]["devices"][0])["attributes"]["uuid"] = {"string": 5}
    return broken


def _unknown_field(obj: dict[str, Any]) -> dict[str, Any]:
    extra = copy.deepcopy(obj)
    extra["spec"]["unknownField"] = True  # refused by the strict schema only
    return extra


@pytest.mark.parametrize(
    ("api_version", "release"),
    [("v1", "1.34"), ("v1beta2", "1.33"), ("v1beta1", "1.32")],
    ids=["v1-on-1.34", "v1beta2-on-1.33", "v1beta1-on-1.32"],
)
@pytest.mark.parametrize(
    ("change", "valid"),
    [(lambda o: o, True), (_broken, False), (_unknown_field, False)],
    ids=["as-built-passes", "wrong-type-refused", "unknown-field-refused"],
)
def test_the_cached_check_agrees_with_kubernetes_validate(
    api_version: str, release: str, change: Any, valid: bool
) -> None:
    obj = change(_slice(api_version))
    verdicts = []
    library = lambda: kubernetes_validate.validate(obj, release, strict=True)  # noqa: E731
    for check in (library, lambda: validate_strict(obj, release)):
        try:
            check()
            verdicts.append(True)
        except kubernetes_validate.ValidationError:
            verdicts.append(False)
    assert verdicts == [valid, valid]
