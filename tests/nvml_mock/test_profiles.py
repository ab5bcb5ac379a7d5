"""What the real backend reads through NVML on each mock profile, held against what the profile file declares:
enumeration order, UUIDs, PCI bus ids, minor numbers, model, memory, driver and CUDA versions, and the live
readings the /metrics gauges show."""

from __future__ import annotations

import pytest

from device_plugin.core.errors import NvmlError
from device_plugin.nvml.telemetry import GpuTelemetry
from tests.nvml_mock.conftest import HostPool, OpenReal
from tests.nvml_mock.mock_folder import PROFILES

pytestmark = pytest.mark.nvml_mock
EACH = pytest.mark.parametrize("profile", PROFILES, ids=[f"mock-{p}" for p in PROFILES])


@EACH
def test_gpus_are_enumerated_in_the_declared_order_with_their_uuids_and_bus_ids(
    real_on: OpenReal, mock_hosts: HostPool, profile: str
) -> None:
    declared = mock_hosts.profile(profile)
    gpus = real_on(profile).gpus()
    assert [(g.index, g.uuid, g.pci_bus_id) for g in gpus] == [(d.index, d.uuid, d.pci_bus_id) for d in declared.gpus]


@EACH
def test_model_and_memory_are_the_declared_ones(real_on: OpenReal, mock_hosts: HostPool, profile: str) -> None:
    declared = mock_hosts.profile(profile)
    gpus = real_on(profile).gpus()
    assert {(g.name, g.memory_mib) for g in gpus} == {(declared.model, declared.memory_mib)}


@EACH
def test_minor_numbers_name_the_declared_device_nodes(real_on: OpenReal, mock_hosts: HostPool, profile: str) -> None:
    backend = real_on(profile)
    assert [backend.device_minor(g.index) for g in backend.gpus()] == [
        g.minor for g in mock_hosts.profile(profile).gpus
    ]


@EACH
def test_driver_and_cuda_versions(real_on: OpenReal, mock_hosts: HostPool, profile: str) -> None:
    declared = mock_hosts.profile(profile)
    info = real_on(profile).system_info()
    assert (info.driver_version, info.cuda_driver_version) == (declared.driver_version, declared.cuda_version)


@EACH
def test_telemetry_reads_the_declared_idle_readings(real_on: OpenReal, mock_hosts: HostPool, profile: str) -> None:
    declared = mock_hosts.profile(profile)
    backend = real_on(profile)
    for gpu in backend.gpus():
        assert backend.telemetry(gpu.index) == GpuTelemetry(
            index=gpu.index,
            memory_total_mib=declared.memory_mib,
            memory_used_mib=declared.memory_used_mib,
            utilisation_percent=declared.utilisation_percent,
            temperature_c=declared.temperature_c,
            power_w=declared.power_w,
        )


def test_a_gpu_past_the_last_is_an_error_naming_the_call_the_gpu_and_nvmls_code(real_on: OpenReal) -> None:
    backend = real_on("t4")
    count = len(backend.gpus())
    with pytest.raises(NvmlError, match=f"nvmlDeviceGetHandleByIndex on GPU {count} failed: Not Found") as caught:
        backend.telemetry(count)
    assert caught.value.code == 6  # NVML_ERROR_NOT_FOUND from the mock (a driver says INVALID_ARGUMENT, 2)
