"""Turn a node's base resources and the time-slicing config into the resources to advertise.

Boundary: Devices in, Devices out. A base resource is a name with its whole devices (GPUs with
id = GPU UUID, or MIG devices with id = MIG UUID), each with gpu_indices and numa_node. Each
selected device becomes `replicas` Devices "<id>::<n>" carrying the same gpu_indices, numa_node and
health, so that ResourceManager.set_gpu_health reaches every replica of a GPU, in every resource.

Devices a resource entry does not select stay, whole, in the original resource. A shared resource
that keeps the original name while some devices stay whole would mix replicas and whole GPUs under
one name (a pod asking for 1 could get either): that is refused, and the message says to rename.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from device_plugin.allocation.protocols import device_sort_key
from device_plugin.config.sharing_model import (
    Placement,
    SelectionKind,
    SharedResourceSpec,
    SharingConfig,
    TimeSlicingConfig,
)
from device_plugin.core.devices import Device
from device_plugin.core.errors import ConfigError
from device_plugin.core.ids import REPLICA_SEPARATOR, format_replica_id, parse_device_id

log = logging.getLogger(__name__)

MAX_DEVICE_ID_LENGTH = 63  # the kubelet's limit on a device ID
# Why a kubelet-chosen set breaks requireDistinctGPUs, and what to do: ReplicaPolicy and Allocate
# refusals end with it.
KUBELET_CHOSEN_ADVICE = (
    "The kubelet chose these replicas itself, without GetPreferredAllocation: it does so when its "
    "Topology Manager "
    "policy (single-numa-node, restricted or best-effort) finds free replicas on the chosen NUMA "
    "node(s) that "
    "exactly cover the request, or when it reuses an init container's devices. With "
    "requireDistinctGPUs, run the "
    "kubelet with --topology-manager-policy=none (the default, under which it always asks "
    "GetPreferredAllocation), "
    "or request one replica per container"
)


@dataclass(frozen=True)
class SharedResource:
    """One advertised time-sliced resource: where it came from and how requests for it are
    served."""

    name: str  # the advertised name
    source_name: str  # the base resource its devices come from
    replicas: int
    base_ids: tuple[str, ...]  # the shared GPU / MIG UUIDs, canonical order
    placement: Placement
    require_distinct_gpus: bool
    fail_requests_greater_than_one: bool
    field: str  # the config entry, for messages


@dataclass(frozen=True)
class AdvertisedResources:
    """Every resource to advertise (name -> devices in canonical order) and which of them are
    shared.

    A resource left with no devices (all of them shared under another name) is omitted.
    `unmatched` lists config entries (their field) whose resource this node does not have.
    """

    devices: Mapping[str, tuple[Device, ...]]
    shared: Mapping[str, SharedResource]
    unmatched: tuple[str, ...] = ()


def replica_devices(base: Device, replicas: int) -> tuple[Device, ...]:
    """`replicas` copies of `base` with IDs "<id>::0" .. "<id>::<replicas-1>"."""
    if replicas < 1:
        raise ValueError(f"replicas must be positive, got {replicas}")
    if REPLICA_SEPARATOR in base.id or base.id.endswith(":"):
        # Sharing a replica again, or an ID that would not parse back; never produced by NVML.
        raise ValueError(f"device {base.id!r} cannot be replicated: its ID would not round-trip")
    return tuple(replace(base, id=format_replica_id(base.id, n)) for n in range(replicas))


def share_resources(
    base: Mapping[str, Sequence[Device]],
    config: SharingConfig | TimeSlicingConfig | None,
) -> AdvertisedResources:
    """The advertised resources for `base` (name -> whole devices) under `config`."""
    time_slicing = config.time_slicing if isinstance(config, SharingConfig) else config
    remaining = {
        name: {d.id: d for d in sorted(devs, key=device_sort_key)} for name, devs in base.items()
    }
    for name, devices in remaining.items():
        replicated = sorted(i for i in devices if parse_device_id(i).replica is not None)
        if replicated:
            raise ValueError(
                f"base resource {name} already holds replicas ({', '.join(replicated)})"
            )
    shared_devices: dict[str, tuple[Device, ...]] = {}
    shared: dict[str, SharedResource] = {}
    unmatched: list[str] = []
    claimed: dict[str, str] = {}  # base device ID -> field of the entry that shares it
    for spec in time_slicing.resources if time_slicing else ():
        if not base.get(spec.name):
            if spec.devices.kind is not SelectionKind.ALL:
                raise ConfigError(
                    spec.devices.field, f"this node has no {spec.name} devices to select from"
                )
            close = difflib.get_close_matches(spec.name, list(base), n=1, cutoff=0.8)
            hint = (
                f" (did you mean {close[0]}?)"
                if close
                else f"; it serves {', '.join(sorted(base)) or 'none'}"
            )
            log.warning(
                "%s: this node has no %s devices, so nothing is shared%s",
                spec.field,
                spec.name,
                hint,
            )
            unmatched.append(spec.field)
            continue
        pool = remaining[spec.name]
        selected = _select(spec, base[spec.name], claimed)
        for device in selected:
            claimed[device.id] = spec.field
            del pool[device.id]
        replicas = tuple(r for device in selected for r in _replicas_checked(device, spec))
        shared_devices[spec.advertised_name] = tuple(sorted(replicas, key=device_sort_key))
        shared[spec.advertised_name] = SharedResource(
            name=spec.advertised_name,
            source_name=spec.name,
            replicas=spec.replicas,
            base_ids=tuple(d.id for d in selected),
            placement=spec.placement,
            require_distinct_gpus=spec.require_distinct_gpus,
            fail_requests_greater_than_one=spec.fail_requests_greater_than_one,
            field=spec.field,
        )
    advertised = {name: tuple(pool.values()) for name, pool in remaining.items() if pool}
    for name, replicas in shared_devices.items():
        if name in advertised:
            # Either an unrenamed partial share, or a rename onto another base resource's name.
            source = shared[name].source_name
            hint = (
                "set rename or renameByDefault"
                if source == name
                else f"{name} is already a resource on this node"
            )
            field = f"{shared[name].field}.{'name' if source == name else 'rename'}"
            raise ConfigError(
                field, f"{name} would advertise replicas and whole devices under one name; {hint}"
            )
        advertised[name] = replicas
    ordered = {name: advertised[name] for name in sorted(advertised)}
    return AdvertisedResources(
        MappingProxyType(ordered),
        MappingProxyType({n: shared[n] for n in sorted(shared)}),
        tuple(unmatched),
    )


def share_resource(
    name: str, devices: Sequence[Device], config: SharingConfig | TimeSlicingConfig | None
) -> Mapping[str, tuple[Device, ...]]:
    """share_resources() for one base resource: the names it is advertised under -> their
    devices."""
    return share_resources({name: devices}, config).devices


def _select(
    spec: SharedResourceSpec, devices: Sequence[Device], claimed: Mapping[str, str]
) -> list[Device]:
    ordered = sorted(devices, key=device_sort_key)
    selection = spec.devices
    if selection.kind is SelectionKind.ALL:
        chosen = ordered
    elif selection.kind is SelectionKind.COUNT:
        if selection.count > len(ordered):
            raise ConfigError(
                selection.field,
                f"asks for the first {selection.count} of {spec.name}, this node has "
                f"{len(ordered)}",
            )
        chosen = ordered[: selection.count]
    else:
        chosen = []
        for entry in selection.entries:
            if entry.gpu_index is not None:
                matches = [d for d in ordered if entry.gpu_index in d.gpu_indices]
                what = f"GPU {entry.gpu_index}"
            else:
                matches = [d for d in ordered if d.id == entry.device_id]
                what = str(entry.device_id)
            if not matches:
                raise ConfigError(entry.field, f"{what} has no {spec.name} device on this node")
            chosen.extend(d for d in matches if d not in chosen)
        chosen.sort(key=device_sort_key)
    for device in chosen:
        if device.id in claimed:
            raise ConfigError(
                selection.field, f"{device.id} is already shared by {claimed[device.id]}"
            )
    return chosen


def _replicas_checked(device: Device, spec: SharedResourceSpec) -> tuple[Device, ...]:
    longest = format_replica_id(device.id, spec.replicas - 1)
    if len(longest) > MAX_DEVICE_ID_LENGTH:
        raise ConfigError(
            f"{spec.field}.replicas",
            f"replica ID {longest} is longer than the kubelet's {MAX_DEVICE_ID_LENGTH}",
        )
    return replica_devices(device, spec.replicas)
