"""This driver's half of NodePrepareResources: which CDI devices a claim's allocation prepares, or
why not.

Boundary: implements the helper's Driver protocol (dra_helper/driver.py); pure over the node's
devices as the front-end last showed them (`see`: names, UUIDs, the unhealthy ones) and the claim's
opaque configs for this driver. The read, the locks, exclusivity and the checkpoint are the helper's
(dra_helper/claims/prepare.py). A device is refused when it is of another pool, unknown on this node
or unhealthy; a config of ours that cannot be applied refuses the claim.

CDI: the GPU itself is named from the spec that the NVIDIA Container Toolkit generates on the node
(`nvidia-ctk cdi generate`, kind `nvidia.com/gpu`), by UUID: a whole GPU is
`nvidia.com/gpu=GPU-<uuid>`, a MIG device `nvidia.com/gpu=MIG-<uuid>`. The container then gets
exactly the allocated devices, and the toolkit keeps owning the driver libraries and device nodes.
The node's spec must contain UUID names (the toolkit's `--device-name-strategy=uuid`). With
per-process isolation a share also gets a CDI device of ours (dra/mps/cdi_spec.py: its MPS pipe
folder and limits), whose spec `apply` writes after the checkpoint has the claim
(dra/mps/share_setup.py); a claim's MPS shares must be on one GPU, since a container reaches one MPS
daemon.

Opaque configs: the scheduler copies the DeviceClass's and the claim's configs into
`status.allocation.devices.config[]` (`source` FromClass or FromClaim, `requests` it applies to, all
of the claim's when empty, and `opaque{driver, parameters}`). Configs for other drivers are not ours
to judge. Ours are read defensively (dra_helper/claims/claim.py's rules: any part may be of the
wrong type) and checked against the devices of the requests they apply to. This driver sets no GPU
time-slice, and a share's MPS settings are the node's, not a claim's. So of NVIDIA's kinds
(apiVersion resource.nvidia.com/v1beta1), `GpuConfig` on whole GPUs and `MigDeviceConfig` on MIG
devices are accepted without `sharing`: they then ask for the device as it is, which is what is
prepared. A `sharing` section (TimeSlicing with any interval, MPS) would be silently not applied, so
it is refused, as is a kind on the wrong device type, any other kind or apiVersion, and unknown
fields, with a reason that names the config. A GPU is shared through consumable capacity instead
(dra/memory_shares.py): a result with a `shareID` is prepared as that share of the device, and
refused where the device is not published as shareable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from device_plugin.core.names import CDI_KIND
from device_plugin.core.short_text import one_line, short
from device_plugin.dra.memory_shares import isolated, share_for
from device_plugin.dra.mps.cdi_spec import SpecError
from device_plugin.dra.mps.share_setup import MpsShareSetup
from device_plugin.dra_helper.checkpoint.values import PreparedDevice, Share
from device_plugin.dra_helper.claims.claim import (
    Allocation,
    ClaimBodyError,
    allocation_items,
    json_object,
    kind_of,
    text_field,
)
from device_plugin.dra_helper.claims.prepare import NAME_CHARS

MAX_CONFIGS = 32  # the API's limit on a claim's (and an allocation's) configs
NVIDIA_API_VERSION = "resource.nvidia.com/v1beta1"
# NVIDIA's config kinds we accept, and the device type each one applies to (NVIDIA's pairing).
ACCEPTED_KINDS = {"GpuConfig": "gpu", "MigDeviceConfig": "mig"}
ALLOWED_FIELDS = frozenset({"apiVersion", "kind"})


def cdi_device_id(uuid: str) -> str:
    return f"{CDI_KIND}={uuid}"


class PrepareDecision:
    """The Driver of the helper's Preparer: `decide` a claim's devices from its allocation, over the
    devices as the front-end last showed them (`see`); `held` records what claims hold and wakes
    `on_held`."""

    def __init__(
        self,
        *,
        driver_name: str,
        pool_name: str,
        on_held: Callable[[], None] = lambda: None,
        mps: MpsShareSetup | None = None,
    ) -> None:
        self._driver = driver_name
        self._pool = pool_name
        # per-process isolation: the shares' MPS daemons and CDI specs; None: isolation none
        self.mps = mps
        # (device name -> UUID of every device, healthy or not; the unhealthy names; name -> memory
        # MiB of the shareable ones): one value, replaced whole, so a decide reads all from one
        # moment, lock-free.
        self._view: tuple[Mapping[str, str], frozenset[str], Mapping[str, int]] = (
            {},
            frozenset(),
            {},
        )
        self._held_lock = threading.Lock()
        self._held: tuple[int, frozenset[str], Mapping[str, int]] = (0, frozenset(), {})
        self._on_held = on_held

    def see(
        self, uuids: Mapping[str, str], unhealthy: frozenset[str], shareable: Mapping[str, int]
    ) -> None:
        """The node's devices now, which are unhealthy, and the memory (MiB) of each one published
        as shareable (after every inventory or health change)."""
        self._view = (uuids, unhealthy, shareable)

    def held(self, snapshot: int, devices: frozenset[str], shared_mib: Mapping[str, int]) -> None:
        """The helper's Driver.held: recorded unless a newer snapshot already was; `on_held()`
        (which must return at once: it runs on the prepare worker) when the devices held, or their
        shares, changed."""
        with self._held_lock:
            if snapshot <= self._held[0]:
                return  # a change told late: a newer one is already recorded
            # an adminAccess claim, or one of a claim's devices again: no change
            changed = devices != self._held[1] or shared_mib != self._held[2]
            self._held = (snapshot, devices, shared_mib)
        if changed:
            self._on_held()

    def unhealthy(self) -> frozenset[str]:
        return self._view[1]

    def holdings(self) -> frozenset[str]:
        """The devices claims hold now (without adminAccess), as last told."""
        return self._held[1]

    def shared_memory(self) -> Mapping[str, int]:
        """Device name -> MiB its shares hold, for each device held as shares, as last told."""
        return self._held[2]

    def decide(
        self, body: Mapping[str, Any], allocation: Allocation
    ) -> tuple[tuple[PreparedDevice, ...], list[str]]:
        configs = read_configs(body, self._driver)
        devices, problems = self._resolve(allocation)
        return devices, problems + self._refused_configs(configs, allocation)

    # ---- the helper's Driver: what a claim's shares need on the node (dra/mps/share_setup.py) ----

    def apply(self, claim_uid: str, devices: Sequence[PreparedDevice]) -> str:
        return self.mps.apply(claim_uid, devices) if self.mps else ""

    def release(self, claim_uid: str, devices: Sequence[PreparedDevice]) -> None:
        if self.mps:
            self.mps.release(claim_uid, devices)

    def adopt(self, claims: Mapping[str, Sequence[PreparedDevice]]) -> None:
        if self.mps:
            self.mps.adopt(claims)

    def _mps_ids(self, claim_uid: str, index: int, share: Share | None) -> tuple[str, ...]:
        """The share's CDI device of ours, with per-process isolation. SpecError: the UID cannot
        name it."""
        if self.mps is None or not isolated(share):
            return ()
        return (self.mps.cdi_device_id(claim_uid, index),)

    def _resolve(self, allocation: Allocation) -> tuple[tuple[PreparedDevice, ...], list[str]]:
        known, unhealthy, shareable = self._view
        problems: list[str] = []
        devices: list[PreparedDevice] = []
        for result in allocation.devices:
            pool, device = one_line(result.pool, NAME_CHARS), one_line(result.device, NAME_CHARS)
            if result.pool != self._pool:
                problems.append(
                    f"device {pool}/{device} belongs to pool {pool!r}, not this node's "
                    f"{self._pool!r}"
                )
            elif result.device not in known:
                problems.append(f"device {device} is unknown on this node")
            elif result.device in unhealthy:
                problems.append(f"device {device} is unhealthy")
            else:
                share, problem = share_for(result, shareable.get(result.device))
                if problem:
                    problems.append(problem)
                    continue
                try:
                    ours = self._mps_ids(allocation.uid, len(devices), share)
                except SpecError as error:
                    problems.append(str(error))
                    continue
                # Containers (and the kubelet, matching them against request_names) know "<request>"
                # only.
                devices.append(
                    PreparedDevice(
                        (result.request,) if result.request else (),
                        result.pool,
                        result.device,
                        (cdi_device_id(known[result.device]), *ours),
                        result.admin_access,
                        share,
                    )
                )
        mps = self.mps is not None
        gpus = sorted({d.device_name for d in devices if mps and isolated(d.share)})
        if len(gpus) > 1:  # NVIDIA's driver has the same limit (its issue 1283)
            problems.append(
                f"the claim has MPS shares of {len(gpus)} GPUs ({', '.join(gpus[:4])}): a "
                "container reaches one MPS daemon (one pipe folder), so a claim's shares must be "
                "on one GPU; ask for one share per claim"
            )
        return tuple(devices), problems

    def _refused_configs(
        self, configs: Sequence[OpaqueConfig], allocation: Allocation
    ) -> list[str]:
        """Why each of our configs cannot be applied to the devices of the requests it names
        (read_configs, refusal)."""
        known = self._view[0]
        refused = []
        for config in configs:
            types = {
                "mig" if known.get(d.device, "").startswith("MIG-") else "gpu"
                for d in allocation.devices
                if applies_to(config, d.request)
            }
            # a config for none of our requests asks nothing
            reason = refusal(config, types) if types else None
            if reason is not None:
                refused.append(reason)
        return refused


@dataclass(frozen=True)
class OpaqueConfig:
    where: str  # "status.allocation.devices.config[<i>]": how a message names it
    source: str  # FromClass | FromClaim ("" when absent)
    requests: tuple[str, ...]  # empty: every request of the claim
    parameters: Mapping[str, Any]


def read_configs(body: Mapping[str, Any], driver: str) -> tuple[OpaqueConfig, ...]:
    """The allocation's opaque configs for `driver`. ClaimBodyError: a part has the wrong shape."""
    ours = []
    for where, item in allocation_items(body, "config", MAX_CONFIGS):
        opaque = json_object(item.get("opaque"), f"{where}.opaque")
        if not opaque or text_field(opaque, "driver", f"{where}.opaque") != driver:
            continue
        requests = item.get("requests") or []
        if not isinstance(requests, list) or not all(isinstance(r, str) for r in requests):
            raise ClaimBodyError(f"{where}.requests is {short(requests)}, not a list of strings")
        source = item.get("source", "")
        parameters = opaque.get("parameters")
        if not isinstance(parameters, Mapping):
            kind = kind_of(parameters)
            raise ClaimBodyError(
                f"{where}.opaque.parameters is a {kind} ({short(parameters)}), not an object"
            )
        ours.append(
            OpaqueConfig(
                where, source if isinstance(source, str) else "", tuple(requests), parameters
            )
        )
    return tuple(ours)


def applies_to(config: OpaqueConfig, request: str) -> bool:
    """A config names `<request>` or `<request>/<subrequest>`; none named means every request."""
    return not config.requests or any(r.split("/", 1)[0] == request for r in config.requests)


def refusal(config: OpaqueConfig, device_types: Collection[str]) -> str | None:
    """Why `config` cannot be applied to devices of `device_types` ("gpu", "mig"); None when it is
    accepted."""
    params = config.parameters
    api_version, kind = params.get("apiVersion"), params.get("kind")
    named = (
        f"config {config.where} ({config.source or 'no source'}, {short(api_version)} "
        f"{short(kind)})"
    )
    if api_version != NVIDIA_API_VERSION or not isinstance(kind, str) or kind not in ACCEPTED_KINDS:
        accepted = ", ".join(f"{NVIDIA_API_VERSION} {k}" for k in ACCEPTED_KINDS)
        return f"{named}: not a kind this driver knows (accepted: {accepted})"
    wrong = sorted(t for t in device_types if t != ACCEPTED_KINDS[kind])
    if wrong:
        return (
            f"{named}: applies to {ACCEPTED_KINDS[kind]} devices, but its requests got "
            f"{'/'.join(wrong)} devices"
        )
    if "sharing" in params:
        sharing = params["sharing"]
        strategy = sharing.get("strategy") if isinstance(sharing, Mapping) else None
        return (
            f"{named}: sharing (strategy {short(strategy)}) is not supported: this driver sets no "
            "GPU time-slice, "
            "and a share's MPS limits are the node's (its memoryIsolation attribute), not a "
            "claim's; remove "
            "`sharing` to get the device as it is, or ask for a share with capacity.requests"
        )
    unknown = sorted(str(k) for k in params if k not in ALLOWED_FIELDS)
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        return f"{named}: unknown fields {', '.join(short(u) for u in unknown[:5])}{more}"
    return None
