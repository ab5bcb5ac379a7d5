"""This driver's half of NodePrepareResources: which CDI devices a claim's allocation prepares, or why not.

Boundary: implements the helper's Driver protocol (kubelet_plugin/driver.py); pure over the node's
devices as the front-end sees them now (a DeviceView: names, UUIDs, the unhealthy ones) and the claim's
opaque configs for this driver (claim_config). The read, the locks, exclusivity and the checkpoint are
the helper's (kubelet_plugin/claims/prepare.py). A device is refused when it is of another pool, unknown
on this node or unhealthy; a config of ours that cannot be applied refuses the claim.

CDI: we do not write a CDI spec. We answer names from the spec that the NVIDIA Container Toolkit
generates on the node (`nvidia-ctk cdi generate`, kind `nvidia.com/gpu`), by UUID: a whole GPU is
`nvidia.com/gpu=GPU-<uuid>`, a MIG device `nvidia.com/gpu=MIG-<uuid>`. The container then gets exactly
the allocated devices, and the toolkit keeps owning the driver libraries and device nodes. The node's
spec must contain UUID names (the toolkit's `--device-name-strategy=uuid`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from device_plugin.core.names import CDI_KIND
from device_plugin.core.short_text import one_line
from device_plugin.dra.claim_config import OpaqueConfig, applies_to, read_configs, refusal
from device_plugin.kubelet_plugin.checkpoint.store import PreparedDevice
from device_plugin.kubelet_plugin.claims.claim import Allocation
from device_plugin.kubelet_plugin.claims.prepare import NAME_CHARS


class DeviceView(Protocol):
    def device_uuids(self) -> Mapping[str, str]:
        """Device name -> UUID of every device this node has, healthy or not."""
        ...

    def unhealthy(self) -> frozenset[str]:
        """Names of devices that are unhealthy now."""
        ...

    def held(self, snapshot: int, devices: frozenset[str]) -> None:
        """What claims hold now (the helper's Driver.held, passed on): the one-GPU ranks follow it."""
        ...


def cdi_device_id(uuid: str) -> str:
    return f"{CDI_KIND}={uuid}"


class PrepareDecision:
    """The Driver of the helper's Preparer: `decide` a claim's devices from its allocation."""

    def __init__(self, *, driver_name: str, pool_name: str, devices: DeviceView) -> None:
        self._driver = driver_name
        self._pool = pool_name
        self._devices = devices

    def held(self, snapshot: int, devices: frozenset[str]) -> None:
        self._devices.held(snapshot, devices)

    def decide(self, body: Mapping[str, Any], allocation: Allocation) -> tuple[tuple[PreparedDevice, ...], list[str]]:
        configs = read_configs(body, self._driver)
        devices, problems = self._resolve(allocation)
        return devices, problems + self._refused_configs(configs, allocation)

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
