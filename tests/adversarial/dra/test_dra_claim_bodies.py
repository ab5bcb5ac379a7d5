"""Any shape of ResourceClaim body is that claim's error only; every claim of the call is answered.

Reproduction of issue 18 item 3: one malformed claim (a results item that is a string, a `status` that
is a string, `metadata` that is a list, `request: null`, a `device` that is a list) made the whole
NodePrepareResources answer UNKNOWN with a traceback, and the good claim of the same call got no
answer although it had been checkpointed. Long names from the kubelet's request are cut in the error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.service.grpc_service import DraGrpcServer
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from tests.adversarial.dra.harness import DRIVER, NODE, HeldClaims, prepare

GOOD = {"request": "g", "driver": DRIVER, "pool": NODE, "device": "gpu-1"}
META = {"namespace": "ns", "name": "bad", "uid": "uid-bad"}


def _allocated(*results: Any) -> dict[str, Any]:
    return {"metadata": META, "status": {"allocation": {"devices": {"results": list(results)}}}}


BODIES = {
    "results-item-a-string": (_allocated("gpu-0"), "results[0] is a str"),
    "status-a-string": ({"metadata": META, "status": "allocated"}, "status is a str"),
    "metadata-a-list": ({"metadata": [META], "status": {}}, "metadata is a list"),
    "request-null": (_allocated({**GOOD, "request": None, "device": "gpu-0"}), "results[0].request is None"),
    "device-a-list": (_allocated({**GOOD, "device": ["gpu-0"]}), "results[0].device is ['gpu-0'] (list)"),
    "body-a-list": ([META], "the ResourceClaim is a list"),
    "results-an-object": (
        {"metadata": META, "status": {"allocation": {"devices": {"results": {"0": GOOD}}}}},
        "results is a dict",
    ),
    "admin-access-a-string": (_allocated({**GOOD, "device": "gpu-0", "adminAccess": "yes"}), "adminAccess is 'yes'"),
    "uid-a-number": ({"metadata": {"uid": 7}}, "metadata.uid is a int"),
    "driver-null": (_allocated({**GOOD, "driver": None}), "results[0].driver is None"),
    "request-a-lone-surrogate": (_allocated({**GOOD, "request": "\ud800", "device": "gpu-0"}), "not valid UTF-8"),
    "million-results": (_allocated(*[GOOD] * 1_000_000), "holds 1000000 items"),
}


@pytest.mark.parametrize(("body", "expected"), list(BODIES.values()), ids=list(BODIES))
def test_a_malformed_claim_is_its_own_error_and_the_good_claim_is_prepared(
    root: Path, claims: HeldClaims, server: DraGrpcServer, body: Any, expected: str
) -> None:
    good = claims.add("good", "uid-good", "gpu-1")
    claims.claims[("ns", "bad")] = body
    answer = prepare(SocketPaths.for_driver(DRIVER, root).endpoint, [("ns", "uid-bad", "bad"), good])
    assert set(answer.claims) == {"uid-bad", "uid-good"}
    error = answer.claims["uid-bad"].error
    assert error.startswith("claim ns/bad (uid-bad): malformed ResourceClaim: ") and expected in error
    assert len(error) <= 400 and not answer.claims["uid-bad"].devices
    assert answer.claims["uid-good"].error == "" and answer.claims["uid-good"].devices[0].device_name == "gpu-1"
    assert Checkpoint(root / "plugins" / DRIVER / "checkpoint.json").uids() == ("uid-good",)


def test_a_claim_sent_twice_is_answered_once_with_its_devices_once(
    root: Path, claims: HeldClaims, server: DraGrpcServer
) -> None:
    claim = claims.add("twice", "uid-2x", "gpu-2")
    answer = prepare(SocketPaths.for_driver(DRIVER, root).endpoint, [claim, claim])
    assert [d.device_name for d in answer.claims["uid-2x"].devices] == ["gpu-2"]


def test_a_megabyte_claim_name_gives_a_short_error(root: Path, server: DraGrpcServer) -> None:
    name = "n" * (1 << 20)
    answer = prepare(SocketPaths.for_driver(DRIVER, root).endpoint, [("ns", "uid-big", name)])
    error = answer.claims["uid-big"].error
    assert "the ResourceClaim does not exist" in error and len(error) < 300
