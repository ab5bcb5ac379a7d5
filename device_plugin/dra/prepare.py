"""NodePrepareResources / NodeUnprepareResources logic, without gRPC: claims in, CDI device IDs out.

Boundary: reads ResourceClaims through a ClaimFetcher (the API server, awaited on the serving loop:
kubelet_plugin/claims/fetch.py) or a ClaimReader (blocking: tests' dicts and slow stand-ins), knows the node's devices
through a DeviceView, remembers answers in a Checkpoint. Per-claim problems become a per-claim error
message naming the claim and the device (cut short); they never raise, and a claim answered with an
error has nothing checkpointed. A Prepare is three steps, so that its caller can run the read and the
write where each belongs (dra/servicers.py): `ticket` (the claim's place in claim_locks), `read` or
`fetch` (no lock held), `settle` (decide and write, blocking; in a worker thread).

A claim's state only moves the way the kubelet asked (claim_locks): the claim is read without any lock,
then decided and written under the claim's lock, and only if no Unprepare of it succeeded meanwhile and
its caller has not given up. A checkpointed claim is still read: while the API server says what the
checkpoint says, the checkpoint's answer is given again; when the allocation changed, the claim is
prepared afresh; when the read fails, the checkpoint answers (the kubelet read the claim just before).
A device held by another prepared claim is refused (device_holders). Opaque configs addressed to this
driver are accepted or refused per claim (claim_config).

CDI: we do not write a CDI spec. We answer names from the spec that the NVIDIA Container Toolkit
generates on the node (`nvidia-ctk cdi generate`, kind `nvidia.com/gpu`), by UUID: a whole GPU is
`nvidia.com/gpu=GPU-<uuid>`, a MIG device `nvidia.com/gpu=MIG-<uuid>`. The container then gets exactly
the allocated devices, and the toolkit keeps owning the driver libraries and device nodes. The node's
spec must contain UUID names (the toolkit's `--device-name-strategy=uuid`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from device_plugin.core.names import CDI_KIND
from device_plugin.core.short_text import one_line
from device_plugin.dra.claim_config import OpaqueConfig, applies_to, read_configs, refusal
from device_plugin.dra.device_holders import DeviceHolders, Hold
from device_plugin.dra.prepare_types import ClaimFetcher, ClaimRead, ClaimReader, ClaimRef, DeviceView, PrepareResult
from device_plugin.kubelet_plugin.checkpoint.store import Checkpoint, PreparedClaim, PreparedDevice
from device_plugin.kubelet_plugin.claims.body import Allocation, ClaimBodyError, read_allocation
from device_plugin.kubelet_plugin.claims.locks import ClaimLocks, Ticket

log = logging.getLogger(__name__)

NAME_CHARS = 64  # of a claim's namespace, name, UID or a device name in a message
ERROR_CHARS = 1024  # of a whole per-claim error


def cdi_device_id(uuid: str) -> str:
    return f"{CDI_KIND}={uuid}"


def claim_label(namespace: str, name: str, uid: str) -> str:
    """'claim ns/name (uid)' with each part cut short: names come from the kubelet's request."""
    return f"claim {one_line(namespace, NAME_CHARS)}/{one_line(name, NAME_CHARS)} ({one_line(uid, NAME_CHARS)})"


def _holds(claim: PreparedClaim) -> tuple[Hold, ...]:
    return tuple(Hold(d.device_name, d.admin_access) for d in claim.devices)


def _never() -> bool:
    return False


def _why(error: Exception) -> str:
    return str(error) or type(error).__name__  # a bare TimeoutError says nothing by itself


class Preparer:
    def __init__(
        self,
        *,
        driver_name: str,
        pool_name: str,
        reader: ClaimReader | ClaimFetcher,
        devices: DeviceView,
        checkpoint: Checkpoint,
    ) -> None:
        self._driver = driver_name
        self._pool = pool_name
        # One of the two: a fetcher is awaited (`fetch`), a reader blocks (`read`).
        self.fetcher: ClaimFetcher | None = reader if isinstance(reader, ClaimFetcher) else None
        self._reader: ClaimReader | None = None if isinstance(reader, ClaimFetcher) else reader
        self._devices = devices
        self._checkpoint = checkpoint
        self._locks = ClaimLocks()
        self.holders = DeviceHolders()
        self.holders.load(self._checkpointed())

    def _checkpointed(self) -> list[tuple[str, str, tuple[Hold, ...]]]:
        claims = ((uid, self._checkpoint.get(uid)) for uid in self._checkpoint.uids())
        return [(uid, claim_label(c.namespace, c.name, uid), _holds(c)) for uid, c in claims if c is not None]

    def in_flight(self) -> int:
        """Claims with a Prepare or Unprepare running now (their lock entries; 0 when idle)."""
        return len(self._locks)

    def prepare(self, claims: Sequence[ClaimRef]) -> dict[str, PrepareResult]:
        """One result per claim UID (every claim of the request answers, as the kubelet requires)."""
        return {claim.uid: self.prepare_claim(claim) for claim in claims}

    def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, str]:
        """Claim UID -> error ("" on success). Unknown claims succeed: there is nothing to undo."""
        return {claim.uid: self.unprepare_claim(claim) for claim in claims}

    def prepare_claim(self, claim: ClaimRef, gave_up: Callable[[], bool] = _never) -> PrepareResult:
        """Prepare one claim in this thread with the blocking reader; `gave_up()` True means its caller left
        (the answer will not be written)."""
        with self._locks.ticket(claim.uid) as ticket:
            return self.settle(claim, ticket, self.read(claim, gave_up), gave_up)

    def ticket(self, uid: str) -> Ticket:
        """The claim's place in claim_locks, from before its read until after its settle (then `release()`)."""
        return self._locks.issue(uid)

    def read(self, claim: ClaimRef, gave_up: Callable[[], bool] = _never) -> ClaimRead | None:
        """Read the claim with the blocking reader (no lock held: an Unprepare of it never waits for this);
        None, not read, when its caller left (it was queued meanwhile: no API read for nobody)."""
        if self._reader is None:
            raise TypeError("this Preparer reads claims with a ClaimFetcher: await fetch()")
        if gave_up():
            return None
        try:
            return ClaimRead(self._reader.get_claim(claim.namespace, claim.name))
        except Exception as error:  # the API server's failure is this claim's error; the kubelet retries
            return ClaimRead(failure=_why(error))

    async def fetch(self, claim: ClaimRef) -> ClaimRead:
        """Read the claim with the fetcher, on the caller's loop (no lock held)."""
        if self.fetcher is None:
            raise TypeError("this Preparer reads claims with a blocking ClaimReader: call read()")
        try:
            return ClaimRead(await self.fetcher.fetch_claim(claim.namespace, claim.name))
        except Exception as error:
            return ClaimRead(failure=_why(error))

    def settle(
        self, claim: ClaimRef, ticket: Ticket, read: ClaimRead | None, gave_up: Callable[[], bool] = _never
    ) -> PrepareResult:
        """Decide and write what `read` says (None: not read, its caller left), under the claim's lock;
        blocks on the checkpoint's write."""
        label = claim_label(claim.namespace, claim.name, claim.uid)
        try:
            result = self._settle(claim, label, ticket, read, gave_up)
        except Exception as error:  # a bug of ours or a broken device view: still this claim's error only
            log.exception("preparing %s failed", label)
            result = PrepareResult(error=f"{label}: internal error: {type(error).__name__}: {error}")
        return PrepareResult(result.devices, one_line(result.error, ERROR_CHARS)) if result.error else result

    def unprepare_claim(self, claim: ClaimRef) -> str:
        """Forget the claim (no Prepare of it that is in flight will write it again); "" on success."""
        with self._locks.ticket(claim.uid) as ticket, ticket.locked():
            ticket.supersede()
            try:
                self._checkpoint.remove(claim.uid)
            except OSError as error:
                label = claim_label(claim.namespace, claim.name, claim.uid)
                return one_line(f"{label}: cannot update the checkpoint: {error}", ERROR_CHARS)
            self.holders.release(claim.uid)
        return ""

    def _settle(
        self, claim: ClaimRef, label: str, ticket: Ticket, read: ClaimRead | None, gave_up: Callable[[], bool]
    ) -> PrepareResult:
        if read is None:
            return PrepareResult(error=f"{label}: the kubelet gave up on this call; nothing prepared")
        if read.failure:
            return self._from_checkpoint(claim, ticket, f"{label}: cannot read the ResourceClaim: {read.failure}")
        body = read.body
        if body is None:
            return self._from_checkpoint(claim, ticket, f"{label}: the ResourceClaim does not exist (deleted?)")
        try:
            allocation = read_allocation(body, self._driver)
            configs = read_configs(body, self._driver)
        except ClaimBodyError as error:
            return PrepareResult(error=f"{label}: malformed ResourceClaim: {error}")
        if allocation.uid != claim.uid:
            uid = one_line(allocation.uid, NAME_CHARS)
            return PrepareResult(error=f"{label}: the ResourceClaim now has UID {uid} (deleted and recreated?)")
        if not allocation.devices:
            return PrepareResult(error=f"{label}: not allocated, or no device of driver {self._driver}")
        devices, problems = self._resolve(allocation)
        problems += self._refused_configs(configs, allocation)
        if problems:
            return PrepareResult(error=f"{label}: " + "; ".join(problems))
        return self._commit(claim, label, ticket, gave_up, PreparedClaim(claim.namespace, claim.name, devices))

    def _from_checkpoint(self, claim: ClaimRef, ticket: Ticket, error: str) -> PrepareResult:
        """The read failed: a claim prepared before is answered as it was, anything else gets `error`."""
        with ticket.locked():
            done = self._checkpoint.get(claim.uid) if ticket.still_wanted() else None
        if done is None:
            return PrepareResult(error=error)
        log.warning("%s; answering what was prepared before", error)
        return PrepareResult(done.devices)

    def _resolve(self, allocation: Allocation) -> tuple[tuple[PreparedDevice, ...], list[str]]:
        known, unhealthy = self._devices.device_uuids(), self._devices.unhealthy()
        problems, devices = [], []
        for result in allocation.devices:
            pool, device = one_line(result.pool, NAME_CHARS), one_line(result.device, NAME_CHARS)
            if result.pool != self._pool:
                problems.append(f"device {pool}/{device} belongs to pool {pool!r}, not this node's {self._pool!r}")
            elif result.device not in known:
                problems.append(f"device {device} is unknown on this node")
            elif result.device in unhealthy:
                problems.append(f"device {device} is unhealthy")
            else:
                # Containers (and the kubelet, matching them against request_names) know "<request>" only.
                devices.append(
                    PreparedDevice(
                        (result.request,) if result.request else (),
                        result.pool,
                        result.device,
                        (cdi_device_id(known[result.device]),),
                        result.admin_access,
                    )
                )
        return tuple(devices), problems

    def _refused_configs(self, configs: Sequence[OpaqueConfig], allocation: Allocation) -> list[str]:
        """Why each of our configs cannot be applied to the devices of the requests it names (claim_config)."""
        known = self._devices.device_uuids()
        refused = []
        for config in configs:
            types = {
                "mig" if known.get(d.device, "").startswith("MIG-") else "gpu"
                for d in allocation.devices
                if applies_to(config, d.request)
            }
            reason = refusal(config, types) if types else None  # a config for none of our requests asks nothing
            if reason is not None:
                refused.append(reason)
        return refused

    def _commit(
        self, claim: ClaimRef, label: str, ticket: Ticket, gave_up: Callable[[], bool], prepared: PreparedClaim
    ) -> PrepareResult:
        """Under the claim's lock: write `prepared` unless unwanted by now, taken, or already there."""
        with ticket.locked():
            if not ticket.still_wanted():
                return PrepareResult(error=f"{label}: unprepared while this Prepare read it; nothing prepared")
            if gave_up():
                return PrepareResult(error=f"{label}: the kubelet gave up on this call; nothing prepared")
            before = self._checkpoint.get(claim.uid)
            if before == prepared:
                return PrepareResult(before.devices)  # idempotent: the same answer
            conflict = self.holders.take(claim.uid, label, _holds(prepared))
            if conflict is not None:
                return PrepareResult(error=f"{label}: {conflict}")
            try:
                self._checkpoint.put(claim.uid, prepared)
            except OSError as error:
                self._restore(claim.uid, label, before)
                return PrepareResult(error=f"{label}: cannot write the checkpoint: {error}")
        if before is not None:
            log.info("%s: its allocation changed since it was prepared; prepared afresh", label)
        return PrepareResult(prepared.devices)

    def _restore(self, uid: str, label: str, before: PreparedClaim | None) -> None:
        if before is None:
            self.holders.release(uid)
        else:
            self.holders.take(uid, label, _holds(before))
