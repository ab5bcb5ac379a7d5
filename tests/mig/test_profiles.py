"""Per-model MIG profile tables and the profile-naming rule the real backend uses."""

from __future__ import annotations

import pytest

from device_plugin.nvml.mig_profiles import memory_gb_for_name, mig_models, profile_name, profile_table
from device_plugin.nvml.mig_types import COMPUTE_SLICES_PER_GPU, MEMORY_SLICES_PER_GPU

EXPECTED_NAMES = [
    ("NVIDIA A100-SXM4-40GB", ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")),
    ("NVIDIA A100-PCIE-40GB", ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")),
    ("NVIDIA A100-SXM4-80GB", ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
    ("NVIDIA A100 80GB PCIe", ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
    ("NVIDIA H100 80GB HBM3", ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
    ("NVIDIA H100 PCIe", ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
    ("NVIDIA H200", ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
]
# The GPU memory NVML reports for each model (MiB): the naming rule needs it.
GPU_MEMORY_MIB = {
    "NVIDIA A100-SXM4-40GB": 40960,
    "NVIDIA A100-PCIE-40GB": 40960,
    "NVIDIA A100-SXM4-80GB": 81920,
    "NVIDIA A100 80GB PCIe": 81920,
    "NVIDIA A100-PCIE-80GB": 81920,
    "NVIDIA H100 80GB HBM3": 81559,
    "NVIDIA H100 PCIe": 81559,
    "NVIDIA H200": 143771,
}


@pytest.mark.parametrize(("model", "names"), EXPECTED_NAMES, ids=[m for m, _ in EXPECTED_NAMES])
def test_model_offers_nvidias_profiles(model: str, names: tuple[str, ...]) -> None:
    table = profile_table(model)
    assert table is not None
    assert table.names == names


@pytest.mark.parametrize("model", mig_models())
def test_each_profile_fits_the_gpu_and_its_placements_do_not_overflow(model: str) -> None:
    table = profile_table(model)
    assert table is not None
    for profile in table.profiles:
        assert 1 <= profile.compute_slices <= COMPUTE_SLICES_PER_GPU
        assert profile.max_instances * profile.compute_slices <= COMPUTE_SLICES_PER_GPU
        assert len(profile.placement_starts) >= profile.max_instances
        assert all(start + profile.memory_slices <= MEMORY_SLICES_PER_GPU for start in profile.placement_starts)


@pytest.mark.parametrize("model", mig_models())
def test_naming_rule_reproduces_every_profile_name_from_its_memory(model: str) -> None:
    """The real backend names profiles from NVML's memory figures; it must agree with the tables."""
    table = profile_table(model)
    assert table is not None
    for profile in table.profiles:
        gb = memory_gb_for_name(profile.memory_mib, GPU_MEMORY_MIB[model])
        assert profile_name(profile.compute_slices, gb, media_extensions=profile.media_extensions) == profile.name


@pytest.mark.parametrize(
    ("gi", "gb", "ci", "me", "expected"),
    [
        (1, 10, None, True, "1g.10gb+me"),
        (3, 20, 1, False, "1c.3g.20gb"),
        (3, 20, 3, False, "3g.20gb"),
    ],
    ids=["media-extensions", "smaller-compute-instance", "full-compute-instance"],
)
def test_profile_name_format(gi: int, gb: int, ci: int | None, me: bool, expected: str) -> None:
    assert profile_name(gi, gb, compute_slices=ci, media_extensions=me) == expected


@pytest.mark.parametrize("model", ["Tesla V100-SXM2-32GB", "NVIDIA L40S", "NVIDIA RTX A6000"])
def test_models_without_mig_have_no_table(model: str) -> None:
    assert profile_table(model) is None
