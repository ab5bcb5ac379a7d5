"""Any shape of a claim's config list is that claim's error only, never a crash or a silent skip of ours.

A config list that is an object, an item that is a string, `opaque` a list, a driver that is null,
parameters that are a string, `requests` a string, more configs than the API allows, `sharing` that is
a string, or ten thousand unknown fields: each is a one-line, bounded error for that claim, and the good
claim of the same call is prepared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from device_plugin.dra_helper.service.grpc_service import DraGrpcServer
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from tests.adversarial.dra.harness import DRIVER, NODE, HeldClaims, prepare

OURS = {"request": "g", "driver": DRIVER, "pool": NODE, "device": "gpu-0"}
NVIDIA = "resource.nvidia.com/v1beta1"


def opaque(parameters: Any, driver: Any = DRIVER) -> dict[str, Any]:
    return {"source": "FromClaim", "opaque": {"driver": driver, "parameters": parameters}}


CONFIGS = {
    "config-an-object": ({"0": opaque({})}, "malformed ResourceClaim: status.allocation.devices.config is a dict"),
    "item-a-string": (["GpuConfig"], "config[0] is a str"),
    "opaque-a-list": ([{"opaque": [DRIVER]}], "config[0].opaque is a list"),
    "driver-null": ([opaque({}, driver=None)], "config[0].opaque.driver is None"),
    "parameters-a-string": ([opaque("kind: GpuConfig")], "config[0].opaque.parameters is a str"),
    "requests-a-string": ([{**opaque({}), "requests": "g"}], "config[0].requests is 'g'"),
    "too-many-configs": ([opaque({})] * 33, "holds 33 items, more than a claim can (32)"),
    "sharing-a-string": (
        [opaque({"apiVersion": NVIDIA, "kind": "GpuConfig", "sharing": "MPS"})],
        "sharing (strategy None) is not supported",
    ),
    "ten-thousand-unknown-fields": (
        [opaque({"apiVersion": NVIDIA, "kind": "GpuConfig", **{f"f{i}": i for i in range(10_000)}})],
        "unknown fields 'f0', 'f1', 'f10', 'f100', 'f1000' and 9995 more",
    ),
    "kind-a-list": ([opaque({"apiVersion": NVIDIA, "kind": ["GpuConfig"]})], "not a kind this driver knows"),
    "kind-a-megabyte": ([opaque({"apiVersion": NVIDIA, "kind": "K" * (1 << 20)})], "not a kind this driver knows"),
}


@pytest.mark.parametrize(("configs", "expected"), list(CONFIGS.values()), ids=list(CONFIGS))
def test_a_config_of_any_shape_is_that_claims_bounded_error(
    root: Path, claims: HeldClaims, server: DraGrpcServer, configs: Any, expected: str
) -> None:
    good = claims.add("good", "uid-good", "gpu-1")
    claims.claims[("ns", "bad")] = {
        "metadata": {"namespace": "ns", "name": "bad", "uid": "uid-bad"},
        "status": {"allocation": {"devices": {"results": [OURS], "config": configs}}},
    }
    answer = prepare(SocketPaths.for_driver(DRIVER, root).endpoint, [("ns", "uid-bad", "bad"), good])
    error = answer.claims["uid-bad"].error
    assert error.startswith("claim ns/bad (uid-bad): ") and expected in error
    assert "\n" not in error and len(error) <= 1024 and not answer.claims["uid-bad"].devices
    assert answer.claims["uid-good"].error == "" and answer.claims["uid-good"].devices[0].device_name == "gpu-1"
