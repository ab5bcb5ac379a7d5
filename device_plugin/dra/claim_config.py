"""Opaque configs addressed to this driver in a claim's allocation: accepted when they ask for nothing this
driver does not do, else refused with a reason that names the config.

Boundary: pure data in, messages out; no I/O. The scheduler copies the DeviceClass's and the claim's
configs into `status.allocation.devices.config[]` (`source` FromClass or FromClaim, `requests` it applies
to, all of the claim's when empty, and `opaque{driver, parameters}`). Configs for other drivers are not
ours to judge. Ours are read defensively (kubelet_plugin/claims/claim.py's rules: any part may be of the wrong type) and
checked against the devices of the requests they apply to.

What is accepted, and why nothing more: this driver answers CDI device IDs only. It writes no CDI spec
(so it cannot set environment variables), sets no GPU time-slice, runs no MPS control daemon. So of
NVIDIA's kinds (apiVersion resource.nvidia.com/v1beta1), `GpuConfig` on whole GPUs and `MigDeviceConfig`
on MIG devices are accepted without `sharing`: they then ask for the device as it is, which is what is
prepared. A `sharing` section (TimeSlicing with any interval, MPS) would be silently not applied, so it is
refused, as is a kind on the wrong device type, any other kind or apiVersion, and unknown fields.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from device_plugin.core.short_text import short
from device_plugin.kubelet_plugin.claims.claim import ClaimBodyError, _kind, _object, _text, allocation_items

MAX_CONFIGS = 32  # the API's limit on a claim's (and an allocation's) configs
NVIDIA_API_VERSION = "resource.nvidia.com/v1beta1"
# NVIDIA's config kinds we accept, and the device type each one applies to (NVIDIA's pairing).
ACCEPTED_KINDS = {"GpuConfig": "gpu", "MigDeviceConfig": "mig"}
ALLOWED_FIELDS = frozenset({"apiVersion", "kind"})


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
        opaque = _object(item.get("opaque"), f"{where}.opaque")
        if not opaque or _text(opaque, "driver", f"{where}.opaque") != driver:
            continue
        requests = item.get("requests") or []
        if not isinstance(requests, list) or not all(isinstance(r, str) for r in requests):
            raise ClaimBodyError(f"{where}.requests is {short(requests)}, not a list of strings")
        source = item.get("source", "")
        parameters = opaque.get("parameters")
        if not isinstance(parameters, Mapping):
            kind = _kind(parameters)
            raise ClaimBodyError(f"{where}.opaque.parameters is a {kind} ({short(parameters)}), not an object")
        ours.append(OpaqueConfig(where, source if isinstance(source, str) else "", tuple(requests), parameters))
    return tuple(ours)


def applies_to(config: OpaqueConfig, request: str) -> bool:
    """A config names `<request>` or `<request>/<subrequest>`; none named means every request."""
    return not config.requests or any(r.split("/", 1)[0] == request for r in config.requests)


def refusal(config: OpaqueConfig, device_types: Collection[str]) -> str | None:
    """Why `config` cannot be applied to devices of `device_types` ("gpu", "mig"); None when it is accepted."""
    params = config.parameters
    api_version, kind = params.get("apiVersion"), params.get("kind")
    named = f"config {config.where} ({config.source or 'no source'}, {short(api_version)} {short(kind)})"
    if api_version != NVIDIA_API_VERSION or not isinstance(kind, str) or kind not in ACCEPTED_KINDS:
        accepted = ", ".join(f"{NVIDIA_API_VERSION} {k}" for k in ACCEPTED_KINDS)
        return f"{named}: not a kind this driver knows (accepted: {accepted})"
    wrong = sorted(t for t in device_types if t != ACCEPTED_KINDS[kind])
    if wrong:
        return f"{named}: applies to {ACCEPTED_KINDS[kind]} devices, but its requests got {'/'.join(wrong)} devices"
    if "sharing" in params:
        sharing = params["sharing"]
        strategy = sharing.get("strategy") if isinstance(sharing, Mapping) else None
        return (
            f"{named}: sharing (strategy {short(strategy)}) is not supported: this driver sets no GPU time-slice "
            "and runs no MPS daemon; remove `sharing` to get the device as it is"
        )
    unknown = sorted(str(k) for k in params if k not in ALLOWED_FIELDS)
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        return f"{named}: unknown fields {', '.join(short(u) for u in unknown[:5])}{more}"
    return None
