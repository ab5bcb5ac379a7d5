"""A MIG device renamed by an upgrade (NVIDIA's naming from v25.12: `gpu-<minor>-mig-<profile>-<GI profile
id>-<placement start>`) is still one device. A claim allocated under the name an earlier release published
(`gpu-<minor>-mig-<GI profile id>-<placement start>-<placement size>`) is prepared as that device; and
when the scheduler, seeing only the new name in the slices, allocates the same device to a second claim,
the node refuses the second, naming the first, before and after a driver restart: exclusivity is by
the device the container gets (its CDI device), not by its name."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_plugin.dra.inventory import build_devices
from device_plugin.dra_helper.claims.prepare import ClaimRef
from device_plugin.nvml.fake.machine import FakeNvml
from tests.adversarial.dra.harness import Devices, HeldClaims, prepared_here, preparer_of
from tests.allocation.machines import topology_of

MACHINE = "a100-mig-7x1g"
DEVICES = build_devices(FakeNvml.from_machine(MACHINE), topology_of(MACHINE))[0]
NEW, OLD = "gpu-2-mig-1g5gb-19-3", "gpu-2-mig-19-3-1"  # one MIG device: its name now, and before v25.12's scheme
# What the front-end shows the decision: every name a Prepare may meet, former ones included.
UUIDS = {n: d.uuid for d in DEVICES for n in (*d.former_names, d.name)}


def test_the_device_is_published_under_nvidias_current_name_and_keeps_its_former_one() -> None:
    (device,) = [d for d in DEVICES if d.name == NEW]
    assert device.former_names == (OLD,)
    assert all("." not in d.name and len(d.name) <= 63 for d in DEVICES)


def test_a_claim_allocated_under_the_former_name_is_prepared_as_the_same_device(tmp_path: Path) -> None:
    claims = HeldClaims()
    old = ClaimRef(*claims.add("old", "uid-old", OLD))
    answer = prepared_here(preparer_of(tmp_path, claims, Devices(uuids=UUIDS)), [old])["uid-old"]
    assert answer.error == ""
    assert [(d.device_name, list(d.cdi_device_ids)) for d in answer.devices] == [
        (OLD, [f"nvidia.com/gpu={UUIDS[NEW]}"])
    ]


@pytest.mark.parametrize("restart", [False, True], ids=["same-driver", "after-restart"])
@pytest.mark.parametrize(("first", "second"), [(OLD, NEW), (NEW, OLD)], ids=["old-then-new", "new-then-old"])
def test_one_device_under_two_names_is_never_prepared_for_two_claims(
    tmp_path: Path, first: str, second: str, restart: bool
) -> None:
    claims = HeldClaims()
    a = ClaimRef(*claims.add("a", "uid-a", first))
    b = ClaimRef(*claims.add("b", "uid-b", second))
    devices = Devices(uuids=UUIDS)
    preparer = preparer_of(tmp_path, claims, devices)
    assert prepared_here(preparer, [a])["uid-a"].error == ""
    if restart:  # the upgrade itself: a new driver reads the old one's checkpoint
        preparer = preparer_of(tmp_path, claims, devices)
    answer = prepared_here(preparer, [b])["uid-b"]
    assert answer.error == (
        f"claim ns/b (uid-b): device {second} is already prepared for claim ns/a (uid-a), not for claim ns/b (uid-b)"
    )
    assert prepared_here(preparer, [a])["uid-a"].error == ""  # the holder keeps its device


def test_a_former_name_holder_the_api_server_no_longer_backs_is_forgotten_for_the_new_claim(tmp_path: Path) -> None:
    """The rival is judged by its own name for the device: an old-name claim still allocated stays, one
    that is gone is forgotten (a lost Unprepare), and the new-name claim then gets the device."""
    claims = HeldClaims()
    a = ClaimRef(*claims.add("a", "uid-a", OLD))
    b = ClaimRef(*claims.add("b", "uid-b", NEW))
    preparer = preparer_of(tmp_path, claims, Devices(uuids=UUIDS))
    assert prepared_here(preparer, [a])["uid-a"].error == ""
    del claims.claims[("ns", "a")]  # its pod went while the kubelet was down: no Unprepare came
    assert prepared_here(preparer, [b])["uid-b"].error == ""
    assert preparer.holders.holders(NEW) == ("uid-b",) and preparer.holders.holders(OLD) == ()
