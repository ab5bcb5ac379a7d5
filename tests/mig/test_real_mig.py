"""RealNvml's MIG discovery over a pynvml-shaped stand-in built from a fake MIG machine.

The stand-in answers MIG calls in NVML's forms (bytes UUIDs, [current, pending] lists, attribute
structs with memorySizeMB, GPU-instance info with profileId and placement, NOT_FOUND for empty slots,
NO_PERMISSION where a driver withholds GPU-instance details), so RealNvml must report exactly what the
FakeNvml reports: profile names included, which the real backend derives from slices and memory.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.mig_profiles import profile_table
from device_plugin.nvml.real.backend import RealNvml
from tests.nvml.nvml_standin import NVML_ERROR_NOT_SUPPORTED, NVMLError, NvmlStandin

NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
MAX_MIG_DEVICES = 7


class MigStandin(NvmlStandin):
    """NvmlStandin plus NVML's MIG calls. MIG device handles are (gpu, slot); GI handles (gpu, gi id)."""

    def __init__(self, fake: FakeNvml, *, withhold_instances: bool = False) -> None:
        super().__init__(fake)
        self._mig_fake = fake
        self._withhold = withhold_instances

    def nvmlDeviceGetMigMode(self, handle: int) -> list[int]:
        mode = self._mig_fake.mig_mode(handle)
        if mode is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return [int(mode.current), int(mode.pending)]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: int) -> int:
        return MAX_MIG_DEVICES

    def _mig(self, handle: tuple[int, int]) -> object:
        gpu, slot = handle
        # A driver numbers slots its own way; list them in reverse so the backend must sort.
        devices = tuple(reversed(self._mig_fake.mig_devices(gpu)))
        if slot >= len(devices):
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return devices[slot]

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: int, slot: int) -> tuple[int, int]:
        self._mig((handle, slot))
        return (handle, slot)

    def nvmlDeviceGetUUID(self, handle: int | tuple[int, int]) -> bytes:
        if isinstance(handle, tuple):
            return self._mig(handle).uuid.encode()  # type: ignore[attr-defined]
        return super().nvmlDeviceGetUUID(handle)

    def nvmlDeviceGetAttributes(self, handle: tuple[int, int]) -> SimpleNamespace:
        mig = self._mig(handle)
        table = profile_table(self._gpus[handle[0]].name)
        assert table is not None
        profile = table.profile(mig.profile)  # type: ignore[attr-defined]
        assert profile is not None
        return SimpleNamespace(
            multiprocessorCount=profile.multiprocessor_count,
            gpuInstanceSliceCount=profile.compute_slices,
            computeInstanceSliceCount=profile.compute_slices,
            memorySizeMB=profile.memory_mib,
        )

    def nvmlDeviceGetGpuInstanceId(self, handle: tuple[int, int]) -> int:
        return self._mig(handle).gpu_instance_id  # type: ignore[attr-defined]

    def nvmlDeviceGetComputeInstanceId(self, handle: tuple[int, int]) -> int:
        return self._mig(handle).compute_instance_id  # type: ignore[attr-defined]

    def nvmlDeviceGetGpuInstanceById(self, handle: int, gi_id: int) -> tuple[int, int]:
        if self._withhold:
            raise NVMLError(NVML_ERROR_NO_PERMISSION)
        return (handle, gi_id)

    def nvmlGpuInstanceGetInfo(self, instance: tuple[int, int]) -> SimpleNamespace:
        gpu, gi_id = instance
        mig = next(d for d in self._mig_fake.mig_devices(gpu) if d.gpu_instance_id == gi_id)
        table = profile_table(self._gpus[gpu].name)
        assert table is not None
        profile = table.profile(mig.profile)
        assert profile is not None
        return SimpleNamespace(
            id=gi_id,
            profileId=profile.profile_id,
            placement=SimpleNamespace(start=mig.placement_start, size=mig.placement_size),
        )

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: int, nvml_profile: int) -> SimpleNamespace:
        table = profile_table(self._gpus[handle].name)
        match = [p for p in table.profiles if p.nvml_profile == nvml_profile] if table else []
        if not match:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(id=match[0].profile_id)


def real_over(fake: FakeNvml, tmp_path: Path, **kwargs: bool) -> RealNvml:
    standin = MigStandin(fake, **kwargs)
    standin.write_sysfs(tmp_path)
    return RealNvml(sys_root=tmp_path, library=standin)


@pytest.mark.parametrize("machine", ["a100-mig-7x1g", "h100-mig-mixed", "dgx1-v100"])
def test_real_backend_reports_what_the_fake_reports(machine: str, tmp_path: Path) -> None:
    fake = FakeNvml.from_machine(machine)
    real = real_over(fake, tmp_path)
    for gpu in fake.gpus():
        assert real.mig_mode(gpu.index) == fake.mig_mode(gpu.index)
        devices, expected = real.mig_devices(gpu.index), fake.mig_devices(gpu.index)
        assert [replace(d, slot=0) for d in devices] == [replace(d, slot=0) for d in expected]
        # The slot is where NVML lists the device (the stand-in lists them in reverse), not its placement
        # rank: "<gpu>:<slot>" is how the container toolkit finds it under deviceIDStrategy index.
        assert [d.slot for d in devices] == list(reversed(range(len(devices))))


def test_withheld_gpu_instance_details_leave_placement_unknown(tmp_path: Path) -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    devices = real_over(fake, tmp_path, withhold_instances=True).mig_devices(2)
    assert [d.profile for d in devices] == ["2g.20gb", "1g.10gb", "1g.10gb", "3g.40gb"]  # GI order; no "+me"
    assert {(d.placement_start, d.placement_size) for d in devices} == {(-1, -1)}
    assert {d.uuid for d in devices} == {d.uuid for d in fake.mig_devices(2)}


def test_real_backend_follows_a_relayout(tmp_path: Path) -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    real = real_over(fake, tmp_path)
    fake.set_mig_layout(3, [{"profile": "1g.20gb", "count": 4}])
    assert [d.profile for d in real.mig_devices(3)] == ["1g.20gb"] * 4
