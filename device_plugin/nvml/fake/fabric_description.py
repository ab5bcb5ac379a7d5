"""The `fabric:` keys and the `imex_channels:` list of a machine description.

    fabric:                                   # what every GPU reports (nvmlDeviceGetGpuFabricInfoV)
      cluster_uuid: "6c2f1a1e-...-...."       # the NVLink fabric's UUID
      clique_id: 32766                        # the NVLink partition these GPUs are in
      state: completed                        # not_supported | not_started | in_progress |
      completed status: 0                               # NVML return code of the registration; 0 =
      success
    gpus:
      - {model: ..., fabric: {state: in_progress}}   # one GPU differs: its keys override the top
        level
    imex_channels: [0]                        # /dev/nvidia-caps-imex-channels/channel<N> nodes
    present

Without `fabric:` a GPU reports state not_supported (no NVLink fabric beyond the node). `state`
defaults to completed when a `fabric:` mapping is given; a completed registration needs a cluster
UUID. Boundary: parsing and validation into FabricInfo values and channel numbers; errors name the
field.
"""

from __future__ import annotations

import uuid as uuid_lib
from collections.abc import Mapping
from typing import Any

from device_plugin.core.errors import MachineDescriptionError
from device_plugin.nvml.fabric_types import (
    MAX_CLIQUE_ID,
    NO_FABRIC,
    ZERO_UUID,
    FabricInfo,
    FabricState,
)
from device_plugin.nvml.fake.description_fields import integer, kind, list_of, mapping, string

FABRIC_KEYS = frozenset({"cluster_uuid", "clique_id", "state", "status"})
MAX_IMEX_CHANNEL = 2047  # the driver creates channels 0..NVreg_ImexChannelCount-1 (default 2048)
_STATES = {state.text: state for state in FabricState}


def parse_fabric_keys(raw: object, field: str) -> Mapping[str, Any]:
    """Check a `fabric:` mapping's keys and value types; the values stay raw until merged per
    GPU."""
    fabric = mapping(raw, field, FABRIC_KEYS, required=())
    checked: dict[str, Any] = {}
    if "cluster_uuid" in fabric:
        text = string(fabric["cluster_uuid"], f"{field}.cluster_uuid")
        try:
            checked["cluster_uuid"] = str(uuid_lib.UUID(text))
        except ValueError:
            raise MachineDescriptionError(
                f"{field}.cluster_uuid",
                f"{text!r} is not a UUID like 6c2f1a1e-0b4d-4c8e-9a57-3f1d2e4b5a60",
            ) from None
    if "clique_id" in fabric:
        checked["clique_id"] = integer(fabric["clique_id"], f"{field}.clique_id", 0, MAX_CLIQUE_ID)
    if "state" in fabric:
        state = fabric["state"]
        if state not in _STATES:
            raise MachineDescriptionError(
                f"{field}.state", f"{kind(state)}; one of {', '.join(_STATES)}"
            )
        checked["state"] = _STATES[state]
    if "status" in fabric:
        checked["status"] = integer(fabric["status"], f"{field}.status", 0, 999)
    return checked


def gpu_fabric(
    machine: Mapping[str, Any] | None, gpu: Mapping[str, Any] | None, field: str
) -> FabricInfo:
    """One GPU's FabricInfo: the machine's `fabric:` keys with the GPU's own over them."""
    if machine is None and gpu is None:
        return NO_FABRIC
    merged = {**(machine or {}), **(gpu or {})}
    state = merged.get("state", FabricState.COMPLETED)
    cluster = merged.get("cluster_uuid", ZERO_UUID)
    if state is FabricState.COMPLETED and merged.get("status", 0) == 0 and cluster == ZERO_UUID:
        raise MachineDescriptionError(
            f"{field}.cluster_uuid", "a completed fabric registration needs a cluster UUID"
        )
    return FabricInfo(state, cluster, merged.get("clique_id", 0), merged.get("status", 0))


def parse_imex_channels(raw: object) -> tuple[int, ...]:
    """The IMEX channel numbers whose device nodes the simulated node has, ascending and unique."""
    if raw is None:
        return ()
    listed = list_of(raw, "imex_channels")
    channels = [
        integer(value, f"imex_channels[{i}]", 0, MAX_IMEX_CHANNEL) for i, value in enumerate(listed)
    ]
    if len(set(channels)) != len(channels):
        raise MachineDescriptionError("imex_channels", f"lists a channel twice: {channels}")
    return tuple(sorted(channels))
