"""What the helper asks of a DRA driver: a claim's prepared devices, decided from its allocation,
and what they need on the node set up (apply) and taken down (release); and what it tells the
driver: which devices claims hold now, and every claim of the checkpoint whenever it was read
(adopt).

Boundary: a Protocol only. Everything else about a claim is the helper's (claims/prepare.py): the
read, the claim's lock and ticket, the checks any driver makes (the claim exists, its UID is the one
asked for, it has devices of this driver), exclusivity between claims (claims/exclusion.py), the
checkpoint and the answer's bounds. What the helper does not ask, the driver tells: the devices to
publish (api/publisher.py's SlicePublisher.request) and their health (the DeviceHealthFeed the
health service streams), whenever they change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from device_plugin.dra_helper.checkpoint.values import PreparedDevice
from device_plugin.dra_helper.claims.claim import Allocation


class Driver(Protocol):
    def decide(
        self, body: Mapping[str, Any], allocation: Allocation
    ) -> tuple[Sequence[PreparedDevice], Sequence[str]]:
        """The devices to prepare for `allocation` (this driver's results, non-empty, of the claim
        `body`), and every problem that refuses the claim instead (none: prepare those devices).
        Called in a prepare worker, before the claim's lock is taken; it must not block on I/O;
        raises ClaimBodyError when the part of `body` the driver reads (its opaque configs) is
        malformed. Problems name the device, cut short."""
        ...

    def held(self, snapshot: int, devices: frozenset[str], shared_mib: Mapping[str, int]) -> None:
        """The devices prepared without adminAccess for some claim now, and the MiB shares hold of
        each shared one, after each change (a Prepare, an Unprepare, a checkpoint read). `snapshot`
        grows with each change: one smaller than one already seen arrived late and is stale. Called
        in the thread that made the change, under no lock of the helper's but the claim's: it must
        return quickly and must not call back into the helper."""
        ...

    def apply(self, claim_uid: str, devices: Sequence[PreparedDevice]) -> str:
        """Set up what the claim's `devices` need on the node (files, daemons); "" when done, else
        why not (the claim is then refused and forgotten). Called under the claim's lock once the
        checkpoint has the claim, also for a Prepare answered again (so it must be idempotent); it
        may block."""
        ...

    def release(self, claim_uid: str, devices: Sequence[PreparedDevice]) -> None:
        """Take down what `apply` set up, once the checkpoint no longer has the claim; never
        raises."""
        ...

    def adopt(self, claims: Mapping[str, Sequence[PreparedDevice]]) -> None:
        """Claim UID -> devices of every claim the checkpoint holds, each time it was read (at
        start, and after another instance changed it): make what is set up on the node match, and
        take down what no claim needs (a crash between a checkpoint change and apply or release
        leaves such things)."""
        ...
