"""Per-model MIG profile tables: which GPU-instance profiles a GPU model offers and where they may
sit.

Facts (checked against NVIDIA's MIG user guide, "Supported MIG Profiles", and `nvidia-smi mig -lgip`
/
`-lgipp` outputs of real A100 and H100 GPUs), all for GPUs with 7 compute and 8 memory slices:
- profiles per model: 1g (7 instances), 1g+me (1, with media engines), 1g with two memory slices
  (4), 2g (3), 3g (2), 4g (1), 7g (1); names carry the memory size in GB ("1g.5gb" on A100-40GB,
  "1g.10gb" on A100-80GB and H100-80GB, "1g.18gb" on H200-141GB);
- placements (memory-slice start:size): 1g and 1g+me at 0..6 size 1; the two-slice 1g at 0,2,4,6
  size 2; 2g at 0,2,4 size 2; 3g at 0,4 size 4; 4g at 0 size 4; 7g at 0 size 8;
- memory_mib is what NVML reports for a GI of the profile (nvidia-smi's GiB column x 1024); SM
  counts are nvidia-smi's. The H200's memory sizes and SM counts were read from a real H200 through
  NVML.
Boundary: pure data; device_plugin.nvml.fake.mig_description validates layouts against it, the fake
reports from it and the real backend names profiles with it.
"""

from __future__ import annotations

from device_plugin.nvml.mig_types import MigProfile, MigProfileTable

# NVML's NVML_GPU_INSTANCE_PROFILE_* constants (C ABI values; pynvml names them).
GI_1_SLICE = 0
GI_2_SLICE = 1
GI_3_SLICE = 2
GI_4_SLICE = 3
GI_7_SLICE = 4
GI_1_SLICE_REV1 = 7  # 1 slice with media extensions ("+me")
GI_2_SLICE_REV1 = 8  # 2 slices with media extensions ("+me"; A30)
GI_1_SLICE_REV2 = 9  # 1 compute slice with 2 memory slices

# (kind, compute slices, memory slices, max instances, placement starts, NVML profile, nvidia-smi
# profile id)
_SHAPES = (
    ("1g", 1, 1, 7, (0, 1, 2, 3, 4, 5, 6), GI_1_SLICE, 19),
    ("1g+me", 1, 1, 1, (0, 1, 2, 3, 4, 5, 6), GI_1_SLICE_REV1, 20),
    ("1g2m", 1, 2, 4, (0, 2, 4, 6), GI_1_SLICE_REV2, 15),
    ("2g", 2, 2, 3, (0, 2, 4), GI_2_SLICE, 14),
    ("3g", 3, 4, 2, (0, 4), GI_3_SLICE, 9),
    ("4g", 4, 4, 1, (0,), GI_4_SLICE, 5),
    ("7g", 7, 8, 1, (0,), GI_7_SLICE, 0),
)
_KINDS = tuple(shape[0] for shape in _SHAPES)


def _table(
    model: str, names: tuple[str, ...], memory_mib: tuple[int, ...], sms: tuple[int, ...]
) -> MigProfileTable:
    """A table from per-kind names, memory and SM counts, in _SHAPES order."""
    profiles = tuple(
        MigProfile(
            name=name,
            compute_slices=compute,
            memory_slices=memory,
            memory_mib=mib,
            multiprocessor_count=sm,
            max_instances=max_instances,
            placement_starts=starts,
            nvml_profile=nvml_profile,
            profile_id=profile_id,
        )
        for (
            _,
            compute,
            memory,
            max_instances,
            starts,
            nvml_profile,
            profile_id,
        ), name, mib, sm in zip(_SHAPES, names, memory_mib, sms, strict=True)
    )
    return MigProfileTable(model=model, profiles=profiles)


_A100_40GB_NAMES = ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
_A100_40GB_MIB = (4864, 4864, 9856, 9856, 19968, 19968, 40192)
_A100_80GB_NAMES = ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
_A100_80GB_MIB = (9728, 9728, 19968, 19968, 40192, 40192, 80896)
_A100_SMS = (14, 14, 14, 28, 42, 56, 98)
_H100_80GB_NAMES = _A100_80GB_NAMES
_H100_80GB_MIB = (9984, 9984, 20096, 20096, 40448, 40448, 81152)
_H100_SXM_SMS = (16, 16, 26, 32, 60, 64, 132)
_H100_PCIE_SMS = (14, 14, 14, 30, 46, 62, 114)
_H200_NAMES = ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")
# Measured on an H200 (driver 580.159): nvmlDeviceGetGpuInstanceProfileInfo's memorySizeMB.
_H200_MIB = (16384, 16384, 33280, 33280, 71424, 71424, 143360)

_TABLES = {
    table.model: table
    for table in (
        _table("NVIDIA A100-SXM4-40GB", _A100_40GB_NAMES, _A100_40GB_MIB, _A100_SMS),
        _table("NVIDIA A100-PCIE-40GB", _A100_40GB_NAMES, _A100_40GB_MIB, _A100_SMS),
        _table("NVIDIA A100-SXM4-80GB", _A100_80GB_NAMES, _A100_80GB_MIB, _A100_SMS),
        _table("NVIDIA A100 80GB PCIe", _A100_80GB_NAMES, _A100_80GB_MIB, _A100_SMS),
        _table("NVIDIA A100-PCIE-80GB", _A100_80GB_NAMES, _A100_80GB_MIB, _A100_SMS),
        _table("NVIDIA H100 80GB HBM3", _H100_80GB_NAMES, _H100_80GB_MIB, _H100_SXM_SMS),
        _table("NVIDIA H100 PCIe", _H100_80GB_NAMES, _H100_80GB_MIB, _H100_PCIE_SMS),
        _table("NVIDIA H200", _H200_NAMES, _H200_MIB, _H100_SXM_SMS),
    )
}


def mig_models() -> tuple[str, ...]:
    """Model names (as NVML reports them) with a profile table, sorted."""
    return tuple(sorted(_TABLES))


def profile_table(model: str) -> MigProfileTable | None:
    """The profile table of a GPU model, or None when the model is not MIG-capable (or not
    known)."""
    return _TABLES.get(model.strip())


def memory_gb_for_name(memory_mib: int, gpu_memory_mib: int) -> int:
    """The "<N>gb" of a profile name from a GI's memory and its GPU's total memory.

    NVIDIA names profiles by memory *fraction*, not by the exact size: the fraction is rounded up to
    eighths (the memory slices), multiplied by the GPU's memory in whole GiB (rounded up), and
    rounded half up. So 4864 MiB of a 40960 MiB A100 is "5gb" and 71424 MiB of a 143771 MiB H200 is
    "71gb".
    """
    if memory_mib <= 0 or gpu_memory_mib <= 0:
        raise ValueError(f"memory must be positive, got {memory_mib} MiB of {gpu_memory_mib} MiB")
    eighths = -(-memory_mib * 8 // gpu_memory_mib)  # ceil(8 * fraction)
    gpu_gib = -(-gpu_memory_mib // 1024)
    return (eighths * gpu_gib * 2 + 8) // 16  # round(eighths / 8 * gpu_gib), halves up


def profile_name(
    gpu_slices: int,
    memory_gb: int,
    *,
    compute_slices: int | None = None,
    media_extensions: bool = False,
) -> str:
    """NVIDIA's profile name: "[<ci>c.]<gi>g.<mem>gb[+me]"."""
    prefix = (
        f"{compute_slices}c." if compute_slices is not None and compute_slices != gpu_slices else ""
    )
    return f"{prefix}{gpu_slices}g.{memory_gb}gb{'+me' if media_extensions else ''}"
