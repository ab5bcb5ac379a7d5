"""GPU fabric facts as NVML reports them (nvmlDeviceGetGpuFabricInfoV): which NVLink clique a GPU is
in.

On rack-scale NVLink systems (GB200/GB300 NVL72) the GPUs of many nodes share one NVLink fabric. The
Fabric Manager registers each GPU with it; NVML then reports, per GPU, the fabric's cluster UUID,
the GPU's clique ID (the NVLink partition it can reach), the registration state and its NVML status.
A GPU outside such a fabric (an HGX node, a PCIe card, an older driver) reports state NOT_SUPPORTED.

Boundary: frozen value types and the one conversion from NVML's raw fields; no NVML calls.
"""

from __future__ import annotations

import uuid as uuid_lib
from dataclasses import dataclass
from enum import IntEnum

ZERO_UUID = "00000000-0000-0000-0000-000000000000"
NVML_SUCCESS = 0
MAX_CLIQUE_ID = 0xFFFFFFFF  # NVML's cliqueId is an unsigned 32-bit integer


class FabricState(IntEnum):
    """nvmlGpuFabricState_t: how far the GPU's registration with the NVLink fabric has come."""

    NOT_SUPPORTED = 0
    NOT_STARTED = 1
    IN_PROGRESS = 2
    COMPLETED = 3

    @property
    def text(self) -> str:
        """The lower-case name machine descriptions use (`in_progress`)."""
        return self.name.lower()


@dataclass(frozen=True)
class FabricInfo:
    """One GPU's fabric registration.

    `cluster_uuid` is the fabric's UUID in canonical lower-case form (ZERO_UUID when NVML gives
    none), `clique_id` the GPU's NVLink clique within it, `status` NVML's return code for the
    registration (0 = success; a failed registration reports state COMPLETED with a non-zero
    status).
    """

    state: FabricState
    cluster_uuid: str = ZERO_UUID
    clique_id: int = 0
    status: int = NVML_SUCCESS

    def __post_init__(self) -> None:
        # ValueError for anything that is not a UUID
        canonical = str(uuid_lib.UUID(self.cluster_uuid))
        object.__setattr__(self, "cluster_uuid", canonical)
        if not 0 <= self.clique_id <= MAX_CLIQUE_ID:
            raise ValueError(f"clique ID {self.clique_id} is outside 0..{MAX_CLIQUE_ID}")

    @property
    def attached(self) -> bool:
        """Registered and usable: state COMPLETED, status success, a cluster UUID (NVIDIA's go-nvlib
        rule)."""
        return (
            self.state is FabricState.COMPLETED
            and self.status == NVML_SUCCESS
            and self.cluster_uuid != ZERO_UUID
        )

    @property
    def clique(self) -> str:
        """`<clusterUUID>.<cliqueID>`, the form of NVIDIA's `nvidia.com/gpu.clique` label."""
        return f"{self.cluster_uuid}.{self.clique_id}"

    def describe(self) -> str:
        """One phrase for log lines: state, and the clique or status where they say something."""
        text = self.state.text
        if self.state is FabricState.COMPLETED:
            text += (
                f" clique {self.clique}"
                if self.status == NVML_SUCCESS
                else f" with NVML status {self.status}"
            )
        return text


NO_FABRIC = FabricInfo(FabricState.NOT_SUPPORTED)


def fabric_from_nvml(state: int, cluster_uuid: bytes, clique_id: int, status: int) -> FabricInfo:
    """NVML's raw fields (16 UUID bytes, as nvmlGpuFabricInfo*_t holds them) as a FabricInfo.

    Raises ValueError for a state NVML does not define or a UUID that is not 16 bytes."""
    if len(cluster_uuid) != 16:
        raise ValueError(f"cluster UUID has {len(cluster_uuid)} bytes, not 16")
    return FabricInfo(
        FabricState(state),
        str(uuid_lib.UUID(bytes=bytes(cluster_uuid))),
        int(clique_id),
        int(status),
    )
