"""Whole GPUs as shares of their memory and compute (consumable capacity), with the isolation a
share gets stated.

Boundary: pure, over the inventory's devices and one allocation result at a time. With
`gpuDevicePlugin.memoryShares` on, each whole GPU is published with `allowMultipleAllocations` and
two capacities with request policies: `memory` (a claim that asks none is charged the whole GPU, so
it is exclusive, as without shares; one that asks `capacity.requests.memory` is charged that much,
rounded up to whole MiB and to at least MIN_SHARE) and `compute` (percent of the GPU's
multiprocessors, 100 in all; a claim that asks none is charged 0: it is not capped). The scheduler
does the arithmetic and names each share (`shareID`); the Prepare records the share (memory, of how
much, compute) and answers its id.

Isolation is published, never implied: `<own domain>/memoryIsolation` says what a share's limits are
on this node (`gpuDevicePlugin.shares.isolation`): `none` (bookkeeping only: every container on the
GPU sees all of it) or `per-process` (an MPS daemon per shared GPU, each CUDA process of a share
capped: dra/mps/). MIG devices are never shared here: a MIG device is already a hardware partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import ROUND_CEILING

from device_plugin.config.share_settings import ISOLATION_NONE
from device_plugin.core.names import own_name
from device_plugin.core.quantity import quantity_bytes, quantity_mib
from device_plugin.core.short_text import one_line
from device_plugin.dra.inventory import DraDevice
from device_plugin.dra.single_order import WHOLE_GPU
from device_plugin.dra_helper.api.devices import RequestPolicy
from device_plugin.dra_helper.checkpoint.values import Share
from device_plugin.dra_helper.claims.claim import AllocatedDevice

MEMORY = "memory"  # NVIDIA's capacity name: the device's memory, as NVIDIA means it
# ours (an unqualified capacity name is in the driver's domain): percent of the SMs
COMPUTE = "compute"
# none asked: charged 0 (not capped); else whole percents
COMPUTE_POLICY = RequestPolicy("0", "0", "1")
ISOLATION_ATTRIBUTE = "memoryIsolation"
# aligned with any GPU's memory, so the default (all of it) is a valid value
MIN_SHARE, STEP = "1Gi", "1Mi"
NOT_SHAREABLE = (
    "is not published as shareable (gpuDevicePlugin.memoryShares is off, or it is a MIG device)"
)
MAX_SHARE_ID_CHARS = 64  # the scheduler writes a UUID (36)


def shareable(
    devices: Sequence[DraDevice], own_domain: str, isolation_level: str = ISOLATION_NONE
) -> tuple[DraDevice, ...]:
    """The devices with every whole GPU shareable by memory and compute; MIG devices as they are."""
    isolation = (own_name(own_domain, ISOLATION_ATTRIBUTE), "string", isolation_level)
    out = []
    for device in devices:
        memory = dict(device.capacity).get(MEMORY)
        if WHOLE_GPU not in device.attributes or memory is None:
            out.append(device)
            continue
        minimum = MIN_SHARE if quantity_mib(memory) >= quantity_mib(MIN_SHARE) else memory
        out.append(
            replace(
                device,
                attributes=(*device.attributes, isolation),
                capacity=(*device.capacity, (COMPUTE, "100")),
                request_policies=(
                    (MEMORY, RequestPolicy(memory, minimum, STEP)),
                    (COMPUTE, COMPUTE_POLICY),
                ),
                allow_multiple_allocations=True,
            )
        )
    return tuple(out)


def memory_of(device: DraDevice) -> int:
    """The device's memory in MiB (its `memory` capacity)."""
    return quantity_mib(dict(device.capacity)[MEMORY])


def shareable_memory(devices: Sequence[DraDevice]) -> dict[str, int]:
    """Device name -> memory MiB of each device published as shareable."""
    return {d.name: memory_of(d) for d in devices if d.allow_multiple_allocations}


def share_for(result: AllocatedDevice, memory_mib: int | None) -> tuple[Share | None, str]:
    """The share an allocation result names (None: the whole device), or why it cannot be prepared
    (a non-empty reason). `memory_mib`: the device's memory when it is published as shareable, else
    None."""
    device, request = one_line(result.device, 64), one_line(result.request, 64)
    if memory_mib is None:
        if result.share_id:
            return (
                None,
                f"device {device} was allocated as a share ({one_line(result.share_id, 64)}), but "
                f"it {NOT_SHAREABLE}",
            )
        if result.asked:
            asked = ", ".join(f"{name} {one_line(q, 32)}" for name, q in result.asked)
            return (
                None,
                f"request {request} asks for a share ({asked}) of {device}, which {NOT_SHAREABLE}",
            )
        return None, ""
    unknown = [name for name, _ in result.asked if name not in (MEMORY, COMPUTE)]
    if unknown:
        names = ", ".join(one_line(n, 64) for n in unknown)
        return None, f"request {request} asks for capacity {names}, which {device} does not publish"
    if len(result.share_id) > MAX_SHARE_ID_CHARS:
        return (
            None,
            f"device {device}: shareID {one_line(result.share_id, 64)} is longer than a share ID "
            "can be",
        )
    if not result.share_id:
        # allocated whole (a scheduler without consumable capacity): held like any whole device
        return None, ""
    consumed = dict(result.consumed)
    try:
        charged = memory_mib if consumed.get(MEMORY) is None else quantity_mib(consumed[MEMORY])
    except ValueError as error:
        return None, f"device {device}: consumedCapacity.{MEMORY}: {error}"
    if charged > memory_mib:
        return (
            None,
            f"device {device}: a share of {charged} MiB is larger than the device's {memory_mib} "
            "MiB",
        )
    try:
        compute = _percent(consumed.get(COMPUTE, "0"))
    except ValueError as error:
        return None, f"device {device}: consumedCapacity.{COMPUTE}: {error}"
    return Share(result.share_id, charged, memory_mib, compute), ""


def _percent(text: str) -> int:
    value = quantity_bytes(text)
    if not 0 <= value <= 100:
        raise ValueError(f"{one_line(text, 32)} is not a percent from 0 to 100")
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def isolated(share: Share | None) -> bool:
    """A share that gets the node's isolation: less than all of the GPU's memory, or compute asked
    (a claim charged the whole GPU and no compute holds it alone, as a whole GPU)."""
    return share is not None and (share.memory_mib < share.of_mib or share.compute_percent > 0)


def share_listing(
    devices: Sequence[DraDevice],
    held: frozenset[str],
    shared_mib: Mapping[str, int],
    rank_attribute: str,
) -> tuple[DraDevice, ...]:
    """The devices in the order the scheduler's first fit should try them for a share: GPUs already
    shared that have room, least room first (best fit), then free GPUs, the one a single whole GPU
    would be taken from first (`rank_attribute`, singleGPURank, where published), then the rest in
    listing order. So a share breaks a whole GPU only when no shared one has room, and then the one
    the allocator would give away first; a whole-GPU claim (charged all of a GPU) can only land on a
    free one either way."""
    position = {d.name: i for i, d in enumerate(devices)}
    minimum = quantity_mib(MIN_SHARE)

    def key(device: DraDevice) -> tuple[int, int, int]:
        at = position[device.name]
        if not device.allow_multiple_allocations:
            return (3, 0, at)
        if any(t.blocks_scheduling for t in device.taints):
            return (2, 0, at)
        used = shared_mib.get(device.name)
        if used is not None:
            free = memory_of(device) - used
            return (0, free, at) if free >= minimum else (2, 0, at)
        if device.name in held:
            return (2, 0, at)
        rank = next(
            (v for n, _, v in device.attributes if n == rank_attribute and isinstance(v, int)), at
        )
        return (1, rank, at)

    return tuple(sorted(devices, key=key))
