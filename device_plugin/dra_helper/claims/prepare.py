"""NodePrepareResources / NodeUnprepareResources, the generic steps, without gRPC: claims in,
prepared devices out.

Boundary: reads ResourceClaims through a ClaimFetcher (in production claims/api_read.py's
ApiClaimFetcher), asks the driver which devices a claim's allocation prepares (the Driver protocol,
dra_helper/driver.py), remembers answers in a Checkpoint. Per-claim problems become a per-claim
error message naming the claim and the device (cut short); they never raise, and a claim answered
with an error has nothing checkpointed. A
Prepare is three steps, so that its caller can run the read and the write where each belongs
(service/servicers.py): `ticket` (the claim's place in claims/exclusion.py), `fetch` (no lock held),
`settle` (decide and write, blocking; in a worker thread).

A claim's state only moves the way the kubelet asked (claims/exclusion.py): the claim is read
without any lock, then decided and written under the claim's lock, and only if no Unprepare of it
succeeded meanwhile and its caller has not given up. A checkpointed claim is still read: while the
API server says what the checkpoint says, the checkpoint's answer is given again; when the
allocation changed, the claim is prepared afresh; when the read fails, the checkpoint answers (the
kubelet read the claim just before). A device held by another prepared claim is refused
(claims/exclusion.py; a device is known by the CDI device its container gets, so one device under
two names is one). What a claim's devices are, and which of its opaque configs are refused, is the
driver's decision; so is what they need on the node (the driver's apply, once the checkpoint has the
claim, and release, once it no longer has it; adopt with every claim whenever the checkpoint is
read), so that after a crash the checkpoint is what the driver matches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext

from device_plugin.core.short_text import one_line
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.checkpoint.values import PreparedClaim
from device_plugin.dra_helper.claims.claim import (
    ClaimBodyError,
    ClaimFetcher,
    ClaimRead,
    ClaimRef,
    PrepareResult,
    read_allocation,
)
from device_plugin.dra_helper.claims.exclusion import ClaimLocks, DeviceHolders, Hold, Ticket
from device_plugin.dra_helper.claims.rivals import read_verdict
from device_plugin.dra_helper.driver import Driver

log = logging.getLogger(__name__)

NAME_CHARS = 64  # of a claim's namespace, name, UID or a device name in a message
ERROR_CHARS = 1024  # of a whole per-claim error
# unprepare_claim's answer when `still_stale` said no
KEPT = "kept: still this node's when read again"


def claim_label(namespace: str, name: str, uid: str) -> str:
    """'claim ns/name (uid)' with each part cut short: names come from the kubelet's request."""
    return (
        f"claim {one_line(namespace, NAME_CHARS)}/{one_line(name, NAME_CHARS)} "
        f"({one_line(uid, NAME_CHARS)})"
    )


def _holds(claim: PreparedClaim) -> tuple[Hold, ...]:
    """A device is known by the CDI device its container gets: one device under two names is one
    device."""
    return tuple(
        Hold(
            d.device_name, d.admin_access, d.share, d.cdi_device_ids[0] if d.cdi_device_ids else ""
        )
        for d in claim.devices
    )


def _held_by(claims: Mapping[str, PreparedClaim]) -> list[tuple[str, str, tuple[Hold, ...]]]:
    """(uid, label, holds) of each claim, as DeviceHolders.load takes them."""
    return [(uid, claim_label(c.namespace, c.name, uid), _holds(c)) for uid, c in claims.items()]


def _never() -> bool:
    return False


def _why(error: Exception) -> str:
    return str(error) or type(error).__name__  # a bare TimeoutError says nothing by itself


class Preparer:
    def __init__(
        self,
        *,
        driver_name: str,
        fetcher: ClaimFetcher,
        driver: Driver,
        checkpoint: Checkpoint,
        serialized: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> None:
        self._driver_name = driver_name
        # rolling-update mode: the lock both instances take for a change
        self._serialized = serialized
        self._decide, self._held = driver.decide, driver.held
        self._apply, self._release, self._adopt = driver.apply, driver.release, driver.adopt
        self._fetcher = fetcher
        self._checkpoint = checkpoint
        self._locks = ClaimLocks()
        self.holders = DeviceHolders()
        self.holders.load(_held_by(self._claims()))

    def reload(self) -> None:
        """Another instance changed the checkpoint: read it again, and hold what it holds now."""
        self._checkpoint.reload()
        self.open()

    def open(self) -> None:
        """Read a deferred checkpoint (once the sockets are ours) and hold its claims' devices;
        again after another instance changed it. ConfigError: the checkpoint folder cannot be
        used."""
        self._checkpoint.open()
        claims = self._claims()
        holders = DeviceHolders()
        holders.load(_held_by(claims))
        self.holders = holders
        self._tell_held()
        self._adopt({uid: claim.devices for uid, claim in claims.items()})

    def _tell_held(self) -> None:
        self._held(*self.holders.snapshot())

    def _claims(self) -> dict[str, PreparedClaim]:
        """Every claim the checkpoint holds now, by UID."""
        claims = ((uid, self._checkpoint.get(uid)) for uid in self._checkpoint.uids())
        return {uid: c for uid, c in claims if c is not None}

    def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, str]:
        """Claim UID -> error ("" on success). Unknown claims succeed: there is nothing to undo."""
        return {claim.uid: self.unprepare_claim(claim) for claim in claims}

    def ticket(self, uid: str) -> Ticket:
        """The claim's place in claims/exclusion.py, from before its read until after its settle
        (then `release()`)."""
        return self._locks.issue(uid)

    async def fetch(self, claim: ClaimRef) -> ClaimRead:
        """Read the claim with the fetcher, on the caller's loop (no lock held)."""
        try:
            return ClaimRead(await self._fetcher.fetch_claim(claim.namespace, claim.name))
        except Exception as error:
            return ClaimRead(failure=_why(error))

    def settle(
        self,
        claim: ClaimRef,
        ticket: Ticket,
        read: ClaimRead | None,
        gave_up: Callable[[], bool] = _never,
    ) -> PrepareResult:
        """Decide and write what `read` says (None: not read, its caller left), under the claim's
        lock; blocks on the checkpoint's write."""
        label = claim_label(claim.namespace, claim.name, claim.uid)
        try:
            with self._serialized():
                result = self._settle(claim, label, ticket, read, gave_up)
        # a bug of ours or a broken device view: still this claim's error only
        except Exception as error:
            log.exception("preparing %s failed", label)
            result = PrepareResult(
                error=f"{label}: internal error: {type(error).__name__}: {error}"
            )
        return (
            PrepareResult(result.devices, one_line(result.error, ERROR_CHARS))
            if result.error
            else result
        )

    def unprepare_claim(
        self, claim: ClaimRef, still_stale: Callable[[], bool] | None = None
    ) -> str:
        """Forget the claim (no Prepare of it that is in flight will write it again); "" on success.
        `still_stale`: asked under the same locks first (the other instance's calls wait meanwhile);
        False keeps the claim and answers KEPT."""
        # settle's order
        with self._serialized(), self._locks.ticket(claim.uid) as ticket, ticket.locked():
            if still_stale is not None and not still_stale():
                return KEPT
            ticket.supersede()
            before = self._checkpoint.get(claim.uid)
            try:
                self._checkpoint.remove(claim.uid)
            except OSError as error:
                label = claim_label(claim.namespace, claim.name, claim.uid)
                return one_line(f"{label}: cannot update the checkpoint: {error}", ERROR_CHARS)
            self.holders.release(claim.uid)
            self._tell_held()
            if before is not None:
                self._release(claim.uid, before.devices)
        return ""

    def _settle(
        self,
        claim: ClaimRef,
        label: str,
        ticket: Ticket,
        read: ClaimRead | None,
        gave_up: Callable[[], bool],
    ) -> PrepareResult:
        if read is None:
            return PrepareResult(
                error=f"{label}: the kubelet gave up on this call; nothing prepared"
            )
        if read.failure:
            return self._from_checkpoint(
                claim, ticket, f"{label}: cannot read the ResourceClaim: {read.failure}"
            )
        body = read.body
        if body is None:
            return self._from_checkpoint(
                claim, ticket, f"{label}: the ResourceClaim does not exist (deleted?)"
            )
        try:
            allocation = read_allocation(body, self._driver_name)
        except ClaimBodyError as error:
            return PrepareResult(error=f"{label}: malformed ResourceClaim: {error}")
        if allocation.uid != claim.uid:
            uid = one_line(allocation.uid, NAME_CHARS)
            return PrepareResult(
                error=f"{label}: the ResourceClaim now has UID {uid} (deleted and recreated?)"
            )
        if not allocation.devices:
            return PrepareResult(
                error=f"{label}: not allocated, or no device of driver {self._driver_name}"
            )
        try:
            devices, problems = self._decide(body, allocation)
        except ClaimBodyError as error:  # the driver's part of the claim (its opaque configs)
            return PrepareResult(error=f"{label}: malformed ResourceClaim: {error}")
        if problems:
            return PrepareResult(error=f"{label}: " + "; ".join(problems))
        prepared = PreparedClaim(claim.namespace, claim.name, tuple(devices))
        self._forget_unbacked(claim.uid, label, prepared)
        return self._commit(claim, label, ticket, gave_up, prepared)

    def _forget_unbacked(self, uid: str, label: str, prepared: PreparedClaim) -> None:
        """Other claims recorded on devices this claim was just read allocated: those the API server
        no longer backs are forgotten (claims/rivals.py), each named with this claim in a
        warning."""
        for rival, device in self.holders.rivals(uid, _holds(prepared)):
            held = self._checkpoint.get(rival)
            if held is None:
                continue
            # the rival's name
            pool = next((d.pool_name for d in held.devices if d.device_name == device), "")
            why = read_verdict(
                self._fetcher, held.namespace, held.name, rival, device, pool, self._driver_name
            )
            if not why:
                continue
            rival_label = claim_label(held.namespace, held.name, rival)
            with self._locks.ticket(rival) as ticket, ticket.locked():
                ticket.supersede()
                try:
                    self._checkpoint.remove(rival)
                except OSError as error:
                    log.warning("%s: cannot forget %s: %s", label, rival_label, error)
                    continue
                self.holders.release(rival)
                self._release(rival, held.devices)
            log.warning(
                "%s is allocated %s, which the checkpoint also recorded for %s; %s: forgetting %s",
                label, device, rival_label, why, rival_label,
            )  # fmt: skip
            self._tell_held()

    def _from_checkpoint(self, claim: ClaimRef, ticket: Ticket, error: str) -> PrepareResult:
        """The read failed: a claim prepared before is answered as it was, anything else gets
        `error`."""
        with ticket.locked():
            done = self._checkpoint.get(claim.uid) if ticket.still_wanted() else None
        if done is None:
            return PrepareResult(error=error)
        rival = self._rival_of(claim.uid, done)
        if rival:  # two records of one device and no word from the API server: confirm neither
            return PrepareResult(error=f"{error}; {rival}")
        log.warning("%s; answering what was prepared before", error)
        return PrepareResult(done.devices)

    def _rival_of(self, uid: str, prepared: PreparedClaim) -> str:
        """ "" when no other claim holds one of `prepared`'s exclusive devices; else why it is not
        confirmed (and an ERROR line naming both claims)."""
        rivals = self.holders.rivals(uid, _holds(prepared))
        if not rivals:
            return ""
        other_uid, device = rivals[0]
        other = self._checkpoint.get(other_uid)
        other_label = claim_label(other.namespace, other.name, other_uid) if other else other_uid
        label = claim_label(prepared.namespace, prepared.name, uid)
        log.error(
            "%s and %s are both recorded on %s; confirming neither", label, other_label, device
        )
        return f"device {device} is also recorded for {other_label}"

    def _commit(
        self,
        claim: ClaimRef,
        label: str,
        ticket: Ticket,
        gave_up: Callable[[], bool],
        prepared: PreparedClaim,
    ) -> PrepareResult:
        """Under the claim's lock: write `prepared` unless unwanted by now, taken, or already
        there."""
        with ticket.locked():
            if not ticket.still_wanted():
                return PrepareResult(
                    error=f"{label}: unprepared while this Prepare read it; nothing prepared"
                )
            if gave_up():
                return PrepareResult(
                    error=f"{label}: the kubelet gave up on this call; nothing prepared"
                )
            before = self._checkpoint.get(claim.uid)
            if before == prepared:
                # another claim still backed on one of its devices
                rival = self._rival_of(claim.uid, prepared)
                if rival:
                    return PrepareResult(error=f"{label}: {rival}")
                # a daemon that died meanwhile: started
                problem = self._apply(claim.uid, prepared.devices)
                return (
                    PrepareResult(error=f"{label}: {problem}")
                    if problem
                    else PrepareResult(before.devices)
                )
            conflict = self.holders.take(claim.uid, label, _holds(prepared))
            if conflict is not None:
                return PrepareResult(error=f"{label}: {conflict}")
            try:
                self._checkpoint.put(claim.uid, prepared)
            except OSError as error:
                self._restore(claim.uid, label, before)
                return PrepareResult(error=f"{label}: cannot write the checkpoint: {error}")
            self._tell_held()
            if before is not None:
                self._release(claim.uid, before.devices)  # what the old allocation set up
            problem = self._apply(claim.uid, prepared.devices)
            if problem:
                return self._undo(claim.uid, label, problem)
        if before is not None:
            log.info("%s: its allocation changed since it was prepared; prepared afresh", label)
        return PrepareResult(prepared.devices)

    def _undo(self, uid: str, label: str, problem: str) -> PrepareResult:
        """Under the claim's lock: what the driver could not set up refuses the claim, which is
        forgotten."""
        try:
            self._checkpoint.remove(uid)
        # it stays recorded; the kubelet's retry or its Unprepare settles it
        except OSError as error:
            log.error("%s: cannot forget it after a failed set-up: %s", label, error)
        else:
            self.holders.release(uid)
            self._tell_held()
        return PrepareResult(error=f"{label}: {problem}")

    def _restore(self, uid: str, label: str, before: PreparedClaim | None) -> None:
        if before is None:
            self.holders.release(uid)
        else:
            self.holders.take(uid, label, _holds(before))
