"""The ResourceSlice objects of one node's pool, as plain dicts in a chosen resource.k8s.io version.

Boundary: pure; SliceDevice values in (api/devices.py), JSON-ready dicts out. One pool per node,
named after the node; at most MAX_DEVICES_PER_SLICE devices per slice
(MAX_DEVICES_PER_SLICE_WITH_TAINTS when any device of the pool carries a taint, the API's limit for
such slices), every slice of the pool carrying the same generation and resourceSliceCount; the
slices are owned by the Node (when its UID is known: the offline `dra slices` command has none and
leaves the owner reference out). v1 and v1beta2 put attributes and capacity on the device, v1beta1
under `basic`. A device's taints (its GPU's health, dra/taints.py) go into `taints` when the API
server keeps them (`taints_kept`); when it does not (the DRADeviceTaints feature off, or a server
older than 1.33), a device with a taint that blocks scheduling is left out of the pool instead.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeVar

from device_plugin.dra_helper.api.devices import MAX_ATTRIBUTES_AND_CAPACITIES, SliceDevice

MAX_DEVICES_PER_SLICE = 128
MAX_DEVICES_PER_SLICE_WITH_TAINTS = 64
MAX_NAME_CHARS = 253  # an object name (DNS subdomain)
NAME_HASH_CHARS = 12  # hex digits of sha256 in a name that had to be cut
# at least; a slice's index in the pool, in hex, so that name order is listing order
INDEX_DIGITS = 5
API_VERSIONS = ("v1", "v1beta2", "v1beta1")  # newest first; older ones are refused
GROUP = "resource.k8s.io"
D = TypeVar("D", bound=SliceDevice)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


def slice_name(node_name: str, driver_name: str, number: int) -> str:
    """Deterministic, so a republish updates the same objects: <node>-<driver with dashes>-<n as 5+
    hex digits>.

    Since Kubernetes 1.36 the allocator sorts a pool's slices by name and takes devices in that
    order, so the index is zero-padded hex (as Go's helper names them): name order is slice order
    for up to 16**5 slices of 128 devices, far more than a node has.

    A name is a DNS subdomain of at most 253 characters, and node names may use all 253. When the
    plain name does not fit, the node name is cut (never ending in '-' or '.') and a hash of the
    whole node and driver name follows it, so two long node names that share a prefix still get
    distinct names."""
    driver = driver_name.replace(".", "-")
    index = f"{number:0{INDEX_DIGITS}x}"
    name = f"{node_name}-{driver}-{index}"
    if len(name) <= MAX_NAME_CHARS:
        return name
    digest = hashlib.sha256(f"{node_name}/{driver_name}".encode()).hexdigest()[:NAME_HASH_CHARS]
    tail = f"-{digest}-{driver}-{index}"
    head = node_name[: max(0, MAX_NAME_CHARS - len(tail))].rstrip("-.")
    return f"{head}{tail}" if head else f"{digest}-{index}"


def device_object(device: SliceDevice, api_version: str) -> dict[str, Any]:
    if not _DNS_LABEL.match(device.name) or len(device.name) > 63:
        raise ValueError(f"device name {device.name!r} is not a DNS label")
    if len(device.attributes) + len(device.capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        raise ValueError(
            f"device {device.name}: more than {MAX_ATTRIBUTES_AND_CAPACITIES} attributes and "
            "capacities"
        )
    attributes = {name: {kind: value} for name, kind, value in device.attributes}
    policies = dict(device.request_policies)
    capacity = {
        name: {
            "value": quantity,
            **({"requestPolicy": policies[name].as_api()} if name in policies else {}),
        }
        for name, quantity in device.capacity
    }
    body: dict[str, Any] = {"attributes": attributes, "capacity": capacity}
    if device.allow_multiple_allocations:
        body["allowMultipleAllocations"] = True
    if device.taints:
        body["taints"] = [t.as_api() for t in device.taints]
    if api_version == "v1beta1":
        return {"name": device.name, "basic": body}
    return {"name": device.name, **body}


def pooled(devices: Sequence[D], *, taints_kept: bool) -> Sequence[D]:
    """What goes into the pool: every device with its taints, or (taints not kept) the devices no
    taint keeps from being scheduled, without taints."""
    if taints_kept:
        return devices
    return [
        replace(d, taints=()) for d in devices if not any(t.blocks_scheduling for t in d.taints)
    ]


def build_slices(
    devices: Sequence[SliceDevice],
    *,
    node_name: str,
    driver_name: str,
    generation: int,
    api_version: str = "v1",
    node_uid: str | None = None,
    taints_kept: bool = True,
) -> list[dict[str, Any]]:
    """The pool's slices in listing order (device order is kept across slices)."""
    if api_version not in API_VERSIONS:
        raise ValueError(
            f"resource.k8s.io/{api_version} is not supported; need one of {', '.join(API_VERSIONS)}"
        )
    devices = pooled(devices, taints_kept=taints_kept)
    size = (
        MAX_DEVICES_PER_SLICE_WITH_TAINTS
        if any(d.taints for d in devices)
        else MAX_DEVICES_PER_SLICE
    )
    chunks = [devices[i : i + size] for i in range(0, len(devices), size)] or [[]]
    out = []
    for number, chunk in enumerate(chunks):
        metadata: dict[str, Any] = {"name": slice_name(node_name, driver_name, number)}
        if node_uid is not None:
            metadata["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node_name,
                    "uid": node_uid,
                    "controller": True,
                }
            ]
        spec = {
            "driver": driver_name,
            "pool": {
                "name": node_name,
                "generation": generation,
                "resourceSliceCount": len(chunks),
            },
            "nodeName": node_name,
            "devices": [device_object(d, api_version) for d in chunk],
        }
        out.append(
            {
                "apiVersion": f"{GROUP}/{api_version}",
                "kind": "ResourceSlice",
                "metadata": metadata,
                "spec": spec,
            }
        )
    return out
