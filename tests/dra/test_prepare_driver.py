"""The helper's Preparer and the Driver it asks: what the helper decides alone, and what it takes from the driver.

The Preparer (dra_helper/claims/prepare.py) knows no GPU: a claim's devices are the driver's decision
(dra_helper/driver.py). A scripted driver, which records each claim it is asked about, shows that the
checks any driver makes stay the helper's (the driver is never asked), and that the driver's answer (its
devices, its problems, a malformed part of the claim, a bug) becomes the claim's answer and checkpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.checkpoint.values import PreparedDevice
from device_plugin.dra_helper.claims.claim import Allocation, ClaimBodyError, ClaimRef, PrepareResult
from device_plugin.dra_helper.claims.prepare import Preparer
from tests.adversarial.dra.harness import DRIVER, HeldClaims

DEVICE = PreparedDevice(("g",), "node-a", "dev-0", ("vendor.example/dev=0",))


@dataclass
class ScriptedDriver:
    """A driver that answers every claim the same way: `devices` and `problems`, or raises `error`."""

    devices: tuple[PreparedDevice, ...] = (DEVICE,)
    problems: tuple[str, ...] = ()
    error: Exception | None = None
    asked: list[str] = field(default_factory=list)  # the UIDs of the allocations it was asked about
    told: list[tuple[int, frozenset[str]]] = field(default_factory=list)  # what held() was told, in turn
    set_up_fails: str = ""  # apply's answer: "" sets up, anything else refuses the claim
    set_up: list[str] = field(default_factory=list)  # the UIDs apply was called for, in turn
    taken_down: list[str] = field(default_factory=list)  # ... and release
    adopted: list[frozenset[str]] = field(default_factory=list)  # the claims each adopt was given

    def decide(self, body: Mapping[str, Any], allocation: Allocation) -> tuple[Sequence[PreparedDevice], Sequence[str]]:
        self.asked.append(allocation.uid)
        if self.error is not None:
            raise self.error
        return self.devices, list(self.problems)

    def held(self, snapshot: int, devices: frozenset[str], shared_mib: Mapping[str, int]) -> None:
        self.told.append((snapshot, devices))

    def apply(self, claim_uid: str, devices: Sequence[PreparedDevice]) -> str:
        self.set_up.append(claim_uid)
        return self.set_up_fails

    def release(self, claim_uid: str, devices: Sequence[PreparedDevice]) -> None:
        self.taken_down.append(claim_uid)

    def adopt(self, claims: Mapping[str, Sequence[PreparedDevice]]) -> None:
        self.adopted.append(frozenset(claims))


def prepared(root: Path, driver: ScriptedDriver, claims: HeldClaims, ref: ClaimRef) -> tuple[PrepareResult, Checkpoint]:
    """One claim through the generic steps (ticket, fetch, settle), as the servicer runs them."""
    checkpoint = Checkpoint(root / "checkpoint.json")
    preparer = Preparer(driver_name=DRIVER, fetcher=claims.fetched(), driver=driver, checkpoint=checkpoint)
    ticket = preparer.ticket(ref.uid)
    try:
        read = asyncio.run(preparer.fetch(ref))
        return preparer.settle(ref, ticket, read), checkpoint
    finally:
        ticket.release()


CASES = [
    # (driver, what the claim's UID is in the API server, its allocated driver, expected error part, asked?)
    (ScriptedDriver(), "uid-1", DRIVER, "", True),
    (
        ScriptedDriver(problems=("device dev-0 is unhealthy", "a config")),
        "uid-1",
        DRIVER,
        "device dev-0 is unhealthy; a config",
        True,
    ),
    (
        ScriptedDriver(error=ClaimBodyError("spec.devices.config[0]: not a mapping")),
        "uid-1",
        DRIVER,
        "malformed ResourceClaim: spec.devices.config[0]: not a mapping",
        True,
    ),
    (
        ScriptedDriver(error=RuntimeError("device view broke")),
        "uid-1",
        DRIVER,
        "internal error: RuntimeError: device view broke",
        True,
    ),
    (ScriptedDriver(), "uid-other", DRIVER, "the ResourceClaim now has UID uid-other", False),
    (ScriptedDriver(), "uid-1", "other.example.com", f"not allocated, or no device of driver {DRIVER}", False),
]
IDS = [
    "the-drivers-devices-are-prepared",
    "the-drivers-problems-refuse-the-claim",
    "a-malformed-part-the-driver-reads",
    "a-driver-bug-is-this-claims-error-only",
    "a-recreated-claim-is-refused-before-the-driver",
    "a-claim-of-another-driver-is-refused-before-the-driver",
]


@pytest.mark.parametrize(("driver", "api_uid", "allocated_to", "error", "asked"), CASES, ids=IDS)
def test_the_preparer_answers_what_the_driver_decides(
    tmp_path: Path, driver: ScriptedDriver, api_uid: str, allocated_to: str, error: str, asked: bool
) -> None:
    claims = HeldClaims()
    claims.add("c", api_uid, "dev-0")
    claims.claims[("ns", "c")]["status"]["allocation"]["devices"]["results"][0]["driver"] = allocated_to
    result, checkpoint = prepared(tmp_path, driver, claims, ClaimRef("ns", "uid-1", "c"))
    assert driver.asked == (["uid-1"] if asked else [])
    if error:
        assert result.error.startswith("claim ns/c (uid-1): "), result.error
        assert error in result.error
        assert (result.devices, checkpoint.get("uid-1")) == ((), None)
    else:
        assert (result.error, result.devices) == ("", (DEVICE,))
        stored = checkpoint.get("uid-1")
        assert stored is not None and stored.devices == (DEVICE,)
        assert [devices for _, devices in driver.told] == [frozenset({"dev-0"})]  # told once, after the write


def test_the_driver_is_told_what_claims_hold_after_each_change_in_growing_snapshots(tmp_path: Path) -> None:
    driver = ScriptedDriver()
    claims = HeldClaims()
    claims.add("c", "uid-1", "dev-0")
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    preparer = Preparer(driver_name=DRIVER, fetcher=claims.fetched(), driver=driver, checkpoint=checkpoint)
    preparer.open()  # the checkpoint read: nothing held yet
    ref = ClaimRef("ns", "uid-1", "c")
    ticket = preparer.ticket(ref.uid)
    try:
        assert preparer.settle(ref, ticket, asyncio.run(preparer.fetch(ref))).error == ""
    finally:
        ticket.release()
    assert preparer.unprepare([ref]) == {"uid-1": ""}
    preparer.reload()  # another instance's change: read again, told again
    assert [devices for _, devices in driver.told] == [frozenset(), frozenset({"dev-0"}), frozenset(), frozenset()]
    snapshots = [snapshot for snapshot, _ in driver.told]
    assert snapshots == sorted(set(snapshots))


def test_what_the_driver_sets_up_follows_the_checkpoint(tmp_path: Path) -> None:
    """apply once the claim is written (and again for a repeated Prepare), release once it is forgotten,
    adopt with every claim each time the checkpoint is read; a failed set-up refuses and forgets the claim."""
    driver = ScriptedDriver()
    claims = HeldClaims()
    claims.add("c", "uid-1", "dev-0")
    checkpoint = Checkpoint(tmp_path / "checkpoint.json")
    preparer = Preparer(driver_name=DRIVER, fetcher=claims.fetched(), driver=driver, checkpoint=checkpoint)
    preparer.open()
    ref = ClaimRef("ns", "uid-1", "c")

    def prepare() -> str:
        ticket = preparer.ticket(ref.uid)
        try:
            return preparer.settle(ref, ticket, asyncio.run(preparer.fetch(ref))).error
        finally:
            ticket.release()

    assert (prepare(), prepare()) == ("", "")
    assert driver.set_up == ["uid-1", "uid-1"]
    preparer.reload()
    assert driver.adopted == [frozenset(), frozenset({"uid-1"})]
    assert preparer.unprepare([ref]) == {"uid-1": ""}
    assert driver.taken_down == ["uid-1"]
    driver.set_up_fails = "GPU GPU-1: the MPS control daemon did not come up within 10 s"
    error = prepare()
    assert error == f"claim ns/c (uid-1): {driver.set_up_fails}"
    assert checkpoint.get("uid-1") is None and preparer.holders.snapshot()[1] == frozenset()
