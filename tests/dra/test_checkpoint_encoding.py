"""checkpoint/format.py's encode writes what dataclasses.asdict would, byte for byte (it builds the dict by hand for
speed), then its CRC-32 as the last key: a field added to PreparedClaim or PreparedDevice and not to encode fails
here, not after a restart."""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict

import pytest

from device_plugin.dra_helper.checkpoint.format import decode, encode
from device_plugin.dra_helper.checkpoint.values import PreparedClaim, PreparedDevice, Share

CLAIMS = {
    "no devices": PreparedClaim("ns", "c", ()),
    "one": PreparedClaim("ns", "c", (PreparedDevice(("gpus",), "pool", "gpu-0", ("nvidia.com/gpu=GPU-1",)),)),
    "several, admin, odd text": PreparedClaim(
        "ns-\u00e9",
        "c\ud800",  # a lone surrogate survives (surrogatepass), as asdict's output did
        (
            PreparedDevice((), "pool", "gpu-1", (), admin_access=True),
            PreparedDevice(("a", "b"), "pool", "mig-1", ("x=MIG-1", "x=MIG-2"), admin_access=False),
        ),
    ),
    "a share": PreparedClaim(
        "ns", "c", (PreparedDevice(("g",), "pool", "gpu-0", ("x=GPU-0",), share=Share("s-1", 20480, 81559)),)
    ),
    "a share with compute": PreparedClaim(
        "ns", "c", (PreparedDevice(("g",), "pool", "gpu-0", ("x=GPU-0",), share=Share("s-1", 20480, 81559, 30)),)
    ),
}


def as_written(claim: PreparedClaim) -> dict[str, object]:
    """asdict(claim), less `share` where a device has none and `compute_percent` where it is 0: such an
    entry is what the release before wrote."""
    value = asdict(claim)
    for device in value["devices"]:
        if device["share"] is None:
            del device["share"]
        elif device["share"]["compute_percent"] == 0:
            del device["share"]["compute_percent"]
    return value


@pytest.mark.parametrize("claim", CLAIMS.values(), ids=CLAIMS.keys())
def test_encode_is_asdict_byte_for_byte_and_decodes_back(claim: PreparedClaim) -> None:
    body = {"version": 2, "uid": "u1", "claim": as_written(claim)}
    expected = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8", "surrogatepass")
    assert encode("u1", claim) == expected[:-1] + b',"crc32":"%08x"}' % zlib.crc32(expected)
    assert decode(json.loads(encode("u1", claim).decode("utf-8", "surrogatepass"))) == ("u1", claim)


BAD_SHARES = [
    pytest.param({"share_id": 1, "memory_mib": 1, "of_mib": 2}, "share.share_id: expected a string", id="numeric-id"),
    pytest.param(
        {"share_id": "s", "memory_mib": -1, "of_mib": 2}, "share.memory_mib: expected a whole number", id="negative"
    ),
    pytest.param(
        {"share_id": "s", "memory_mib": True, "of_mib": 2}, "share.memory_mib: expected a whole number", id="a-bool"
    ),
    pytest.param(["s"], "share: expected a mapping", id="a-list"),
]


@pytest.mark.parametrize(("share", "why"), BAD_SHARES)
def test_a_malformed_share_is_an_entry_error_naming_the_field(share: object, why: str) -> None:
    from device_plugin.dra_helper.checkpoint.format import EntryError, sealed

    claim = as_written(CLAIMS["one"])
    claim["devices"][0]["share"] = share  # type: ignore[index]
    with pytest.raises(EntryError, match=why):
        decode(json.loads(sealed({"version": 2, "uid": "u1", "claim": claim})))
