"""DeviceHolders with many claims on one device: an adminAccess holder shares it with every other holder
(admin access is access to an in-use device), ordinary holders exclude each other, and a refusal names a
holder that really is in the way (the check looks at one or two holders only). Shares of a device live beside
each other while their memory fits and their share IDs differ, never beside a whole holder."""

from __future__ import annotations

import pytest

from device_plugin.dra_helper.checkpoint.values import Share
from device_plugin.dra_helper.claims.exclusion import DeviceHolders, Hold

ADMIN, PLAIN = Hold("gpu-0", admin_access=True), Hold("gpu-0", admin_access=False)

# (what the first claim holds, what the second asks, the second's answer)
PAIRS = [
    (PLAIN, PLAIN, "device gpu-0 is already prepared for claim a, not for claim b"),
    (PLAIN, ADMIN, None),
    (ADMIN, PLAIN, None),
    (ADMIN, ADMIN, None),
    (PLAIN, Hold("gpu-1", admin_access=False), None),
]


@pytest.mark.parametrize(
    ("first", "second", "answer"),
    PAIRS,
    ids=["plain-then-plain-refused", "plain-then-admin-shares", "admin-then-plain-shares", "admin-both", "other-gpu"],
)
def test_two_claims_on_one_device(first: Hold, second: Hold, answer: str | None) -> None:
    holders = DeviceHolders()
    assert holders.take("a", "claim a", (first,)) is None
    assert holders.take("b", "claim b", (second,)) == answer
    expected = ("a",) if answer or second.device != "gpu-0" else ("a", "b")
    assert holders.holders("gpu-0") == expected


def test_many_admin_holders_and_one_plain_share_and_a_second_plain_is_refused_naming_the_first() -> None:
    holders = DeviceHolders()
    for n in range(50):
        assert holders.take(f"a{n}", f"claim a{n}", (ADMIN,)) is None
    assert holders.take("p", "claim p", (PLAIN,)) is None
    assert holders.take("q", "claim q", (PLAIN,)) == "device gpu-0 is already prepared for claim p, not for claim q"
    assert holders.take("a50", "claim a50", (ADMIN,)) is None  # admins still join beside the plain holder
    holders.release("p")
    assert holders.take("q", "claim q", (PLAIN,)) is None
    assert len(holders.holders("gpu-0")) == 52 and "p" not in holders.holders("gpu-0")


def test_a_conflict_kept_from_the_checkpoint_refuses_a_third_plain_claim_naming_one_holder() -> None:
    holders = DeviceHolders()
    holders.load([("p1", "claim p1", (PLAIN,)), ("p2", "claim p2", (PLAIN,))])  # kept, not resolved
    assert holders.take("p3", "claim p3", (PLAIN,)) == "device gpu-0 is already prepared for claim p1, not for claim p3"
    assert holders.take("p1", "claim p1", (PLAIN,)) == "device gpu-0 is already prepared for claim p2, not for claim p1"
    assert holders.take("a", "claim a", (ADMIN,)) is None
    assert holders.holders("gpu-0") == ("a", "p1", "p2")


def test_a_claim_that_changes_from_plain_to_admin_stops_excluding() -> None:
    holders = DeviceHolders()
    assert holders.take("p", "claim p", (PLAIN,)) is None
    assert holders.take("q", "claim q", (PLAIN,)) is not None
    assert holders.take("p", "claim p", (ADMIN,)) is None
    assert holders.take("q", "claim q", (PLAIN,)) is None
    assert holders.holders("gpu-0") == ("p", "q")


def share(share_id: str, memory_mib: int) -> Hold:
    return Hold("gpu-0", admin_access=False, share=Share(share_id, memory_mib, 80))


# (what the first claim holds, what the second asks, the second's answer): shares of one device
SHARE_PAIRS = [
    pytest.param(share("s1", 40), share("s2", 40), None, id="two-shares-that-fit"),
    pytest.param(
        share("s1", 60),
        share("s2", 40),
        "device gpu-0 has 60 of 80 MiB prepared as 1 other shares; this share of 40 MiB for claim b does not fit",
        id="two-shares-that-do-not-fit",
    ),
    pytest.param(
        share("s1", 10), share("s1", 10), "share s1 of gpu-0 is already prepared for claim a", id="one-share-id-twice"
    ),
    pytest.param(
        PLAIN, share("s1", 10), "device gpu-0 is already prepared for claim a, not for claim b", id="whole-then-share"
    ),
    pytest.param(
        share("s1", 10), PLAIN, "device gpu-0 is already prepared for claim a, not for claim b", id="share-then-whole"
    ),
    pytest.param(share("s1", 80), ADMIN, None, id="admin-beside-a-share"),
]


@pytest.mark.parametrize(("first", "second", "answer"), SHARE_PAIRS)
def test_shares_of_one_device(first: Hold, second: Hold, answer: str | None) -> None:
    holders = DeviceHolders()
    assert holders.take("a", "claim a", (first,)) is None
    assert holders.take("b", "claim b", (second,)) == answer
    assert holders.holders("gpu-0") == (("a",) if answer else ("a", "b"))
    assert holders.snapshot()[1] == frozenset({"gpu-0"})  # a shared device is a device in use
    assert [o for o, _ in holders.rivals("b", (second,))] == (["a"] if answer else [])


def test_a_share_released_makes_room_for_the_next() -> None:
    holders = DeviceHolders()
    assert holders.take("a", "claim a", (share("s1", 50),)) is None
    assert holders.take("b", "claim b", (share("s2", 50),)) is not None
    holders.release("a")
    assert holders.take("b", "claim b", (share("s2", 50),)) is None
    holders.release("b")
    assert holders.snapshot()[1] == frozenset() and holders.holders("gpu-0") == ()
