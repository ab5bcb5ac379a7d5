"""checkpoint/format.py's encode writes what dataclasses.asdict would, byte for byte (it builds the dict by hand for
speed), then its CRC-32 as the last key: a field added to PreparedClaim or PreparedDevice and not to encode fails
here, not after a restart."""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict

import pytest

from device_plugin.kubelet_plugin.checkpoint.format import PreparedClaim, PreparedDevice, decode, encode

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
}


@pytest.mark.parametrize("claim", CLAIMS.values(), ids=CLAIMS.keys())
def test_encode_is_asdict_byte_for_byte_and_decodes_back(claim: PreparedClaim) -> None:
    body = {"version": 2, "uid": "u1", "claim": asdict(claim)}
    expected = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8", "surrogatepass")
    assert encode("u1", claim) == expected[:-1] + b',"crc32":"%08x"}' % zlib.crc32(expected)
    assert decode(json.loads(encode("u1", claim).decode("utf-8", "surrogatepass"))) == ("u1", claim)
