"""One device, one prepared claim: exclusivity checked on the node too, not only by the scheduler.

Reproduction of issue 18 item 2: two claims allocated the same GPU (or the same MIG device) were both
prepared. Now the second gets an error naming both claims, also after a restart (the holders are read
back from the checkpoint), unless one of them holds the device with adminAccess (admin access is access
to an in-use device: issue 30 item 3).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from device_plugin.dra_helper.claims.prepare import ClaimRef
from tests.adversarial.dra.harness import Devices, HeldClaims, machine_uuids, prepared_here, preparer_of

MIG = "gpu-2-mig-1g5gb-19-3"
CASES = [
    # (machine, device, first claim adminAccess, second claim adminAccess, second prepared?)
    ("dgx1-v100", "gpu-3", False, False, False),
    ("a100-mig-7x1g", MIG, False, False, False),
    ("dgx1-v100", "gpu-3", True, False, True),
    ("dgx1-v100", "gpu-3", False, True, True),
    ("dgx1-v100", "gpu-3", True, True, True),
    ("a100-mig-7x1g", MIG, True, True, True),
]
IDS = ["gpu-twice", "mig-twice", "admin-then-plain", "plain-then-admin", "gpu-admin-both", "mig-admin-both"]


@pytest.mark.parametrize("restart", [False, True], ids=["same-driver", "after-restart"])
@pytest.mark.parametrize(("machine", "device", "first_admin", "second_admin", "shared"), CASES, ids=IDS)
def test_a_device_prepared_for_one_claim_is_refused_to_another(
    tmp_path: Path, machine: str, device: str, first_admin: bool, second_admin: bool, shared: bool, restart: bool
) -> None:
    claims = HeldClaims()
    devices = Devices(uuids=machine_uuids(machine))
    first = ClaimRef(*claims.add("first", "uid-1", device, admin=first_admin))
    second = ClaimRef(*claims.add("second", "uid-2", device, admin=second_admin))
    preparer = preparer_of(tmp_path, claims, devices)
    assert prepared_here(preparer, [first])["uid-1"].error == ""
    if restart:
        preparer = preparer_of(tmp_path, claims, devices)
    answer = prepared_here(preparer, [second])["uid-2"]
    if shared:
        assert answer.error == "" and [d.device_name for d in answer.devices] == [device]
    else:
        assert answer.error == (
            f"claim ns/second (uid-2): device {device} is already prepared for claim ns/first (uid-1), "
            "not for claim ns/second (uid-2)"
        )
        assert answer.devices == ()
        assert prepared_here(preparer, [first])["uid-1"].error == ""  # the holder keeps its device


def test_the_device_is_free_again_once_its_claim_is_unprepared(tmp_path: Path) -> None:
    claims = HeldClaims()
    first = ClaimRef(*claims.add("first", "uid-1", "gpu-3"))
    second = ClaimRef(*claims.add("second", "uid-2", "gpu-3"))
    preparer = preparer_of(tmp_path, claims)
    assert prepared_here(preparer, [first])["uid-1"].error == ""
    assert "already prepared for claim ns/first" in prepared_here(preparer, [second])["uid-2"].error
    assert preparer.unprepare([first]) == {"uid-1": ""}
    assert prepared_here(preparer, [second])["uid-2"].error == ""
    assert preparer_of(tmp_path, claims).holders.holders("gpu-3") == ("uid-2",)
