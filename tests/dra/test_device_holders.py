"""DeviceHolders with many claims on one device: adminAccess holders share it, a plain holder excludes all
others, and a refusal names a holder that really is in the way (the check looks at one or two holders only)."""

from __future__ import annotations

from device_plugin.kubelet_plugin.claims.holders import DeviceHolders, Hold

ADMIN, PLAIN = Hold("gpu-0", admin_access=True), Hold("gpu-0", admin_access=False)


def test_many_admin_holders_share_and_a_plain_one_is_refused_naming_one_of_them() -> None:
    holders = DeviceHolders()
    for n in range(50):
        assert holders.take(f"a{n}", f"claim a{n}", (ADMIN,)) is None
    assert holders.take("p", "claim p", (PLAIN,)) == "device gpu-0 is already prepared for claim a0, not for claim p"
    assert holders.take("a0", "claim a0", (ADMIN,)) is None  # taking again what it holds is no conflict
    for n in range(50):
        holders.release(f"a{n}")
    assert holders.take("p", "claim p", (PLAIN,)) is None
    assert holders.holders("gpu-0") == ("p",)


def test_an_admin_take_is_refused_by_the_plain_holder_among_admin_ones() -> None:
    holders = DeviceHolders()
    assert holders.take("a1", "claim a1", (ADMIN,)) is None
    holders.load([("p", "claim p", (PLAIN,))])  # a conflict kept from the checkpoint
    assert holders.take("a2", "claim a2", (ADMIN,)) == "device gpu-0 is already prepared for claim p, not for claim a2"
    assert holders.take("p", "claim p", (ADMIN,)) is None  # now admin itself: the others may share
    assert holders.take("a2", "claim a2", (ADMIN,)) is None
    assert holders.holders("gpu-0") == ("a1", "a2", "p")


def test_a_claim_that_changes_from_plain_to_admin_stops_excluding() -> None:
    holders = DeviceHolders()
    assert holders.take("p", "claim p", (PLAIN,)) is None
    assert holders.take("a", "claim a", (ADMIN,)) is not None
    assert holders.take("p", "claim p", (ADMIN,)) is None
    assert holders.take("a", "claim a", (ADMIN,)) is None
