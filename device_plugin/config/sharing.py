"""Parse and validate the `sharing` section of a `version: v1` config (NVIDIA's format, plus our
options).

Boundary: a plain mapping (already loaded from YAML/JSON; checked here and only here) in, a
frozen SharingConfig out, or a ConfigError naming the dotted field. Runs when the config loads, so
it knows no GPUs: a `devices` entry naming a GPU by index or UUID is kept as written, and
timeslice/config.py resolves it against the node's GPUs at build time (index exists, UUID on this
node, nothing twice).

NVIDIA keys (sharing.timeSlicing): renameByDefault, failRequestsGreaterThanOne, resources[] of
{name, replicas, rename, devices}. Unlike NVIDIA's plugin, `rename` and `devices` take effect.
Our extensions, at the top of timeSlicing and per resource: requireDistinctGPUs (bool) and
allocationPolicy (distributed | packed). Unknown keys are refused, so a typo never passes silently.
`sharing.mps` is refused: see MPS_NOT_SUPPORTED.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from device_plugin.config.hints import did_you_mean
from device_plugin.config.sharing_model import (
    SHARED_SUFFIX,
    DeviceSelection,
    Placement,
    SelectionEntry,
    SelectionKind,
    SharedResourceSpec,
    SharingConfig,
    TimeSlicingConfig,
)
from device_plugin.core.ascii_digits import is_ascii_digits
from device_plugin.core.errors import ConfigError
from device_plugin.core.names import GPU_RESOURCE, NVIDIA_DOMAIN
from device_plugin.core.short_text import short

ROOT = "sharing"
MPS_NOT_SUPPORTED = (
    "MPS is not supported in device-plugin mode: it runs no MPS control daemon, and advertising "
    "MPS replicas "
    "without one would be time-slicing under another name. DRA mode offers MPS as the per-process "
    "isolation "
    "of memory shares (gpuDevicePlugin.memoryShares, shares.isolation: per-process; "
    "docs/sharing-dra.md). "
    "Here, use sharing.timeSlicing (no memory or fault isolation) or MIG for isolation."
)

# Documented ranges (docs/configuration.md). The kubelet keeps every replica in memory and in its
# checkpoint, so more than 1024 is a typo; and no node has more GPUs than a `devices: <count>` may
# name.
MAX_REPLICAS = 1024
MAX_DEVICE_COUNT = 1024
_TOP_KEYS = (
    "renameByDefault",
    "failRequestsGreaterThanOne",
    "requireDistinctGPUs",
    "allocationPolicy",
    "resources",
)
_RESOURCE_KEYS = (
    "name",
    "replicas",
    "rename",
    "devices",
    "requireDistinctGPUs",
    "allocationPolicy",
)
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DOMAIN_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*\Z")
_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
_MIG_INDEX_RE = re.compile(r"^[0-9]+:[0-9]+\Z")


def parse_sharing_section(
    raw: Mapping[str, Any] | None, *, default_placement: Placement | str = Placement.DISTRIBUTED
) -> SharingConfig:
    """Validate the `sharing` section. GPU indices and UUIDs in `devices` stay unresolved (see
    module doc).

    `default_placement` is what applies when the file names no allocationPolicy (the caller passes
    flags.plugin.sharedDevicesAllocationPolicy here, if it supports that flag).
    """
    if raw is None:
        return SharingConfig()
    _require_mapping(raw, ROOT)
    _refuse_unknown(raw, ROOT, ("timeSlicing", "mps"))
    mps = raw.get("mps")
    if mps is not None and mps != {}:
        raise ConfigError(f"{ROOT}.mps", MPS_NOT_SUPPORTED)
    time_slicing = raw.get("timeSlicing")
    if time_slicing is None:
        return SharingConfig()
    placement = _placement(default_placement, "default allocation policy")
    return SharingConfig(_parse_time_slicing(time_slicing, f"{ROOT}.timeSlicing", placement))


def _parse_time_slicing(raw: Any, where: str, placement: Placement) -> TimeSlicingConfig:
    _require_mapping(raw, where)
    _refuse_unknown(raw, where, _TOP_KEYS)
    rename_by_default = _bool(raw, "renameByDefault", where, default=False)
    fail_gt_one = _bool(raw, "failRequestsGreaterThanOne", where, default=False)
    distinct = _bool(raw, "requireDistinctGPUs", where, default=False)
    if "allocationPolicy" in raw:
        placement = _placement(raw["allocationPolicy"], f"{where}.allocationPolicy")
    resources = raw.get("resources")
    if not isinstance(resources, list) or not resources:
        raise ConfigError(
            f"{where}.resources", "must be a non-empty list of {name, replicas, ...} entries"
        )
    specs = tuple(
        _parse_resource(
            entry, f"{where}.resources[{i}]", rename_by_default, fail_gt_one, distinct, placement
        )
        for i, entry in enumerate(resources)
    )
    _check_advertised_names(specs, [entry.get("rename") is not None for entry in resources])
    return TimeSlicingConfig(rename_by_default, fail_gt_one, distinct, placement, specs)


def _parse_resource(
    raw: Any,
    where: str,
    rename_by_default: bool,
    fail_gt_one: bool,
    distinct: bool,
    placement: Placement,
) -> SharedResourceSpec:
    _require_mapping(raw, where)
    _refuse_unknown(raw, where, _RESOURCE_KEYS)
    name = _shareable_name(raw.get("name"), f"{where}.name")
    replicas = raw.get("replicas")
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise ConfigError(f"{where}.replicas", f"must be an integer >= 2, got {short(replicas)}")
    if not 2 <= replicas <= MAX_REPLICAS:
        raise ConfigError(
            f"{where}.replicas", f"must be between 2 and {MAX_REPLICAS}, got {replicas}"
        )
    if raw.get("rename") is not None:
        advertised = _resource_name(raw["rename"], f"{where}.rename")
    else:
        advertised = name + SHARED_SUFFIX if rename_by_default else name
        # ".shared" can push a long name past 63 characters
        _check_name_part(advertised, f"{where}.name")
    return SharedResourceSpec(
        field=where,
        name=name,
        replicas=replicas,
        advertised_name=advertised,
        devices=_parse_devices(raw.get("devices"), f"{where}.devices", name),
        placement=_placement(raw["allocationPolicy"], f"{where}.allocationPolicy")
        if "allocationPolicy" in raw
        else placement,
        require_distinct_gpus=_bool(raw, "requireDistinctGPUs", where, default=distinct),
        fail_requests_greater_than_one=fail_gt_one,
    )


def _parse_devices(raw: Any, where: str, name: str) -> DeviceSelection:
    if raw is None or raw == "all":
        return DeviceSelection(where)
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not 1 <= raw <= MAX_DEVICE_COUNT:
            raise ConfigError(where, f"a device count is from 1 to {MAX_DEVICE_COUNT}, got {raw}")
        return DeviceSelection(where, SelectionKind.COUNT, count=raw)
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            where,
            'must be "all", a positive count, or a non-empty list of GPUs/MIG UUIDs; got '
            f"{short(raw)}",
        )
    entries: list[SelectionEntry] = []
    for i, item in enumerate(raw):
        field = f"{where}[{i}]"
        text = (
            str(item).strip()
            if isinstance(item, int | str) and not isinstance(item, bool)
            else None
        )
        if not text:
            raise ConfigError(
                field, f"must be a GPU index, a GPU UUID or a MIG UUID, got {short(item)}"
            )
        if is_ascii_digits(text):
            # on this node? checked at build time
            entries.append(SelectionEntry(field, gpu_index=int(text)))
        elif _MIG_INDEX_RE.match(text):
            raise ConfigError(
                field,
                f"MIG indices like {short(text)} are not supported; name the MIG device by its "
                "UUID",
            )
        elif text.startswith("MIG-"):
            if name == GPU_RESOURCE:
                raise ConfigError(
                    field, f"{text} is a MIG device; {GPU_RESOURCE} shares whole GPUs"
                )
            entries.append(SelectionEntry(field, device_id=text))
        else:
            # a GPU of this node? checked at build time
            entries.append(SelectionEntry(field, gpu_uuid=text))
    return DeviceSelection(where, SelectionKind.LIST, entries=tuple(entries))


def _check_advertised_names(
    specs: Sequence[SharedResourceSpec], has_rename: Sequence[bool]
) -> None:
    """Two entries may share one source resource (disjoint devices), never one advertised name."""
    seen: dict[str, SharedResourceSpec] = {}
    for spec, renamed in zip(specs, has_rename, strict=True):
        first = seen.setdefault(spec.advertised_name, spec)
        if first is not spec:
            field = f"{spec.field}.rename" if renamed else f"{spec.field}.name"
            raise ConfigError(
                field, f"{spec.advertised_name} is already advertised by {first.field}; rename one"
            )


def _shareable_name(raw: Any, where: str) -> str:
    # Ours are all nvidia.com/: the defaults, nvidia.com/mig-<profile>, and the `resources` names
    # (config/resource_names.py); a name this node does not serve is left to build time.
    name = _resource_name(raw, where)
    if not name.startswith(f"{NVIDIA_DOMAIN}/"):
        raise ConfigError(
            where,
            f"only nvidia.com/ resources ({GPU_RESOURCE}, mig-<profile>, `resources` names) can be "
            "shared, "
            f"got {short(name)}",
        )
    return name


def _resource_name(raw: Any, where: str) -> str:
    """An extended-resource name; a bare name gets the nvidia.com/ prefix (as NVIDIA's plugin
    does)."""
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(
            where, f"must be a resource name such as {GPU_RESOURCE}, got {short(raw)}"
        )
    text = raw.strip()
    domain, _, _ = text.rpartition("/")
    if not domain:
        text = f"{NVIDIA_DOMAIN}/{text}"
        domain = NVIDIA_DOMAIN
    if len(domain) > 253 or not _DOMAIN_RE.match(domain):
        raise ConfigError(where, f"{short(domain)} is not a DNS subdomain")
    if domain.endswith(("kubernetes.io", "k8s.io")):
        raise ConfigError(where, f"{domain} is reserved by Kubernetes for its own resources")
    _check_name_part(text, where)
    return text


def _check_name_part(name: str, where: str) -> None:
    part = name.rpartition("/")[2]
    if len(part) > 63 or not _NAME_RE.match(part):
        raise ConfigError(
            where,
            f"{short(part)} must be at most 63 characters of letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit",
        )


def _placement(raw: Any, where: str) -> Placement:
    try:
        return Placement(raw)
    except ValueError:
        choices = " or ".join(p.value for p in Placement)
        raise ConfigError(where, f"must be {choices}, got {short(raw)}") from None


def _bool(raw: Mapping[str, Any], key: str, where: str, *, default: bool) -> bool:
    value = raw.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key}", f"must be true or false, got {short(value)}")
    return value


def _require_mapping(raw: Any, where: str) -> None:
    if not isinstance(raw, Mapping):
        raise ConfigError(where, f"must be a mapping, got {type(raw).__name__}")


def _refuse_unknown(raw: Mapping[str, Any], where: str, known: Sequence[str]) -> None:
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        path = f"{where}.{unknown[0]}"
        guess = did_you_mean(path, [f"{where}.{k}" for k in known])
        hint = f"did you mean {guess}? " if guess else ""
        raise ConfigError(path, f"unknown field; {hint}known fields: {', '.join(known)}")


def sharing_as_file(sharing: SharingConfig) -> dict[str, Any]:
    """The parsed section in the file's keys, with defaults applied (for the effective-config log
    line).

    Parsing the result gives `sharing` back. A resource's allocationPolicy and requireDistinctGPUs
    are written only where they differ from the top-level values, which they default to."""
    ts = sharing.time_slicing
    if ts is None:
        return {}
    resources = []
    for spec in ts.resources:
        entry: dict[str, Any] = {"name": spec.name, "replicas": spec.replicas}
        if spec.renamed:
            entry["rename"] = spec.advertised_name
        entry["devices"] = _devices_as_file(spec.devices)
        if spec.placement is not ts.placement:
            entry["allocationPolicy"] = spec.placement.value
        if spec.require_distinct_gpus != ts.require_distinct_gpus:
            entry["requireDistinctGPUs"] = spec.require_distinct_gpus
        resources.append(entry)
    section = {
        "renameByDefault": ts.rename_by_default,
        "failRequestsGreaterThanOne": ts.fail_requests_greater_than_one,
        "requireDistinctGPUs": ts.require_distinct_gpus,
        "allocationPolicy": ts.placement.value,
        "resources": resources,
    }
    return {"timeSlicing": section}


def _devices_as_file(selection: DeviceSelection) -> Any:
    if selection.kind is SelectionKind.ALL:
        return "all"
    if selection.kind is SelectionKind.COUNT:
        return selection.count
    return [
        e.gpu_index if e.gpu_index is not None else e.gpu_uuid or e.device_id
        for e in selection.entries
    ]
