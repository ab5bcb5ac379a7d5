"""NodePrepareResources / NodeUnprepareResources logic, without gRPC: claims in, CDI device IDs out.

Boundary: reads ResourceClaims through a ClaimReader (the API server in production, a dict in tests),
knows the node's devices through a DeviceView, remembers answers in a Checkpoint. Per-claim problems
become a per-claim error message naming the claim and the device (cut short); they never raise, and a
claim answered with an error has nothing checkpointed.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from device_plugin.core.names import CDI_KIND
from device_plugin.core.short_text import one_line
from device_plugin.dra.checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from device_plugin.dra.claim_body import Allocation, ClaimBodyError, read_allocation
from device_plugin.dra.claim_config import OpaqueConfig, applies_to, read_configs, refusal
from device_plugin.dra.claim_locks import ClaimLocks, Ticket
from device_plugin.dra.device_holders import DeviceHolders, Hold

log = logging.getLogger(__name__)

NAME_CHARS = 64  # of a claim's namespace, name, UID or a device name in a message
ERROR_CHARS = 1024  # of a whole per-claim error


class ClaimReader(Protocol):
    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The ResourceClaim object as a dict, or None when it does not exist (404)."""
        ...


class DeviceView(Protocol):
    def device_uuids(self) -> Mapping[str, str]:
        """Device name -> UUID of every device this node has, healthy or not."""
        ...

    def unhealthy(self) -> frozenset[str]:
        """Names of devices that are unhealthy now."""
        ...


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    uid: str
    name: str


@dataclass(frozen=True)
class PrepareResult:
    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


def cdi_device_id(uuid: str) -> str:
    return f"{CDI_KIND}={uuid}"


def claim_label(namespace: str, name: str, uid: str) -> str:
    """'claim ns/name (uid)' with each part cut short: names come from the kubelet's request."""
    return f"claim {one_line(namespace, NAME_CHARS)}/{one_line(name, NAME_CHARS)} ({one_line(uid, NAME_CHARS)})"


def _holds(claim: PreparedClaim) -> tuple[Hold, ...]:
    return tuple(Hold(d.device_name, d.admin_access) for d in claim.devices)


def _never() -> bool:
    return False


class Preparer:
    def __init__(
        self, *, driver_name: str, pool_name: str, reader: ClaimReader, devices: DeviceView, checkpoint: Checkpoint
    ) -> None:
        self._driver = driver_name
        self._pool = pool_name
        self._reader = reader
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
        """Prepare one claim; `gave_up()` True means its caller left (the answer will not be written)."""
        label = claim_label(claim.namespace, claim.name, claim.uid)
        try:
            with self._locks.ticket(claim.uid) as ticket:
                result = self._prepare(claim, label, ticket, gave_up)
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

    def _prepare(self, claim: ClaimRef, label: str, ticket: Ticket, gave_up: Callable[[], bool]) -> PrepareResult:
        if gave_up():  # queued while its caller left: no API read for an answer nobody waits for
            return PrepareResult(error=f"{label}: the kubelet gave up on this call; nothing prepared")
        try:  # no lock held: an Unprepare of this claim never waits for the API server
            body = self._reader.get_claim(claim.namespace, claim.name)
        except Exception as error:  # the API server's failure is this claim's error; the kubelet retries
            return self._from_checkpoint(claim, ticket, f"{label}: cannot read the ResourceClaim: {error}")
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
