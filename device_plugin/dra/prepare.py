"""NodePrepareResources / NodeUnprepareResources logic, without gRPC: claims in, CDI device IDs out.

Boundary: reads ResourceClaims through a ClaimReader (the API server in production, a dict in tests),
knows the node's devices through a DeviceView, remembers answers in a Checkpoint. Per-claim problems
become a per-claim error message naming the claim and the device; they never raise.

CDI: we do not write a CDI spec. We answer names from the spec that the NVIDIA Container Toolkit
generates on the node (`nvidia-ctk cdi generate`, kind `nvidia.com/gpu`), by UUID: a whole GPU is
`nvidia.com/gpu=GPU-<uuid>`, a MIG device `nvidia.com/gpu=MIG-<uuid>`. The container then gets exactly
the allocated devices, and the toolkit keeps owning the driver libraries and device nodes. The node's
spec must contain UUID names (the toolkit's `--device-name-strategy=uuid`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from device_plugin.dra.checkpoint import Checkpoint, PreparedClaim, PreparedDevice

CDI_KIND = "nvidia.com/gpu"


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


class Preparer:
    def __init__(
        self, *, driver_name: str, pool_name: str, reader: ClaimReader, devices: DeviceView, checkpoint: Checkpoint
    ) -> None:
        self._driver = driver_name
        self._pool = pool_name
        self._reader = reader
        self._devices = devices
        self._checkpoint = checkpoint

    def prepare(self, claims: Sequence[ClaimRef]) -> dict[str, PrepareResult]:
        """One result per claim UID (every claim of the request answers, as the kubelet requires)."""
        return {claim.uid: self._prepare_one(claim) for claim in claims}

    def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, str]:
        """Claim UID -> error ("" on success). Unknown claims succeed: there is nothing to undo."""
        results = {}
        for claim in claims:
            try:
                self._checkpoint.remove(claim.uid)
                results[claim.uid] = ""
            except OSError as error:
                results[claim.uid] = f"claim {claim.namespace}/{claim.name}: cannot update the checkpoint: {error}"
        return results

    def _prepare_one(self, claim: ClaimRef) -> PrepareResult:
        label = f"claim {claim.namespace}/{claim.name} ({claim.uid})"
        done = self._checkpoint.get(claim.uid)
        if done is not None:  # idempotent: the same answer, without reading the claim again
            return PrepareResult(done.devices)
        try:
            obj = self._reader.get_claim(claim.namespace, claim.name)
        except Exception as error:  # the API server's failure is this claim's error; the kubelet retries
            return PrepareResult(error=f"{label}: cannot read the ResourceClaim: {error}")
        if obj is None:
            return PrepareResult(error=f"{label}: the ResourceClaim does not exist (deleted?)")
        uid = (obj.get("metadata") or {}).get("uid")
        if uid != claim.uid:
            return PrepareResult(error=f"{label}: the ResourceClaim now has UID {uid} (deleted and recreated?)")
        results = (((obj.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        ours = [r for r in results if r.get("driver") == self._driver]
        if not ours:
            return PrepareResult(error=f"{label}: not allocated, or no device of driver {self._driver}")
        known, unhealthy = self._devices.device_uuids(), self._devices.unhealthy()
        problems, devices = [], []
        for result in ours:
            pool, device = result.get("pool", ""), result.get("device", "")
            if pool != self._pool:
                problems.append(f"device {pool}/{device} belongs to pool {pool!r}, not this node's {self._pool!r}")
            elif device not in known:
                problems.append(f"device {device} is unknown on this node")
            elif device in unhealthy:
                problems.append(f"device {device} is unhealthy")
            else:
                # A firstAvailable result names "<request>/<subrequest>"; containers (and the kubelet,
                # matching them against request_names) know only "<request>".
                request = result.get("request", "").split("/", 1)[0]
                devices.append(
                    PreparedDevice((request,) if request else (), pool, device, (cdi_device_id(known[device]),))
                )
        if problems:
            return PrepareResult(error=f"{label}: " + "; ".join(problems))
        prepared = PreparedClaim(claim.namespace, claim.name, tuple(devices))
        try:
            self._checkpoint.put(claim.uid, prepared)
        except OSError as error:
            return PrepareResult(error=f"{label}: cannot write the checkpoint: {error}")
        return PrepareResult(prepared.devices)
