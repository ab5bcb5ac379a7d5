"""Frozen MIG value types that NVML backends return and MIG policies consume. No handles, no pynvml.

Vocabulary (NVIDIA's): a MIG-enabled GPU is cut into *GPU instances* (GIs), each a placement of
memory slices with its own compute slices; inside a GI, *compute instances* (CIs) run work. A *MIG
device* is one CI in one GI and is what CUDA, the container toolkit and this plugin address by its
MIG UUID.
"""

from __future__ import annotations

from dataclasses import dataclass

# A100/H100/H200 GPUs have 7 compute slices and 8 memory slices (placements count memory slices).
COMPUTE_SLICES_PER_GPU = 7
MEMORY_SLICES_PER_GPU = 8


@dataclass(frozen=True)
class MigMode:
    """MIG mode of one MIG-capable GPU. `pending` differs from `current` until the GPU is reset."""

    current: bool
    pending: bool


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile of one GPU model, as `nvidia-smi mig -lgip` / NVML's profile info
    list it.

    `placement_starts` are the memory-slice offsets where a GI of this profile may start; it then
    spans `memory_slices` slices. `nvml_profile` is NVML's NVML_GPU_INSTANCE_PROFILE_* constant and
    `profile_id` the ID `nvidia-smi mig -cgi` accepts.
    """

    name: str  # e.g. "1g.10gb", "1g.10gb+me"
    compute_slices: int
    memory_slices: int
    memory_mib: int
    multiprocessor_count: int
    max_instances: int
    placement_starts: tuple[int, ...]
    nvml_profile: int
    profile_id: int

    @property
    def media_extensions(self) -> bool:
        return self.name.endswith("+me")


@dataclass(frozen=True)
class MigProfileTable:
    """The MIG profiles of one GPU model (keyed by the model name NVML reports)."""

    model: str
    profiles: tuple[MigProfile, ...]
    compute_slices: int = COMPUTE_SLICES_PER_GPU
    memory_slices: int = MEMORY_SLICES_PER_GPU

    def profile(self, name: str) -> MigProfile | None:
        for profile in self.profiles:
            if profile.name == name:
                return profile
        return None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(profile.name for profile in self.profiles)


@dataclass(frozen=True)
class MigDevice:
    """One MIG device (a compute instance in a GPU instance) as NVML reports it.

    `profile` is the name NVML tools show ("1g.10gb", "1g.10gb+me"; "1c.3g.20gb" for a compute
    instance smaller than its GPU instance). Placement is in memory slices of the parent GPU.
    """

    uuid: str  # "MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
    profile: str
    memory_mib: int
    multiprocessor_count: int
    parent_index: int
    parent_uuid: str
    gpu_instance_id: int
    compute_instance_id: int
    placement_start: int
    placement_size: int
    # The index nvmlDeviceGetMigDeviceHandleByIndex(parent, slot) finds it at: what NVIDIA's toolkit
    # means by "<gpu>:<slot>" (deviceIDStrategy index). Not the placement order.
    slot: int

    @property
    def whole_instance(self) -> bool:
        """True when the compute instance spans its whole GPU instance (no "Nc." prefix)."""
        return "c." not in self.profile


def mig_device_sort_key(device: MigDevice) -> tuple[int, int, int, int, str]:
    """Canonical order of MIG devices: parent, placement, GI, CI, UUID."""
    return (
        device.parent_index,
        device.placement_start,
        device.gpu_instance_id,
        device.compute_instance_id,
        device.uuid,
    )
