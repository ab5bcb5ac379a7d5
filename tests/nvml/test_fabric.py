"""GPU fabric facts (NVLink clique) and IMEX channel nodes through the hardware layer: the description's
`fabric:`/`imex_channels:` keys, the fake's answers, and RealNvml over a pynvml-shaped stand-in."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from device_plugin.core.errors import MachineDescriptionError, NvmlError
from device_plugin.nvml.fabric_types import NO_FABRIC, ZERO_UUID, FabricInfo, FabricState, fabric_from_nvml
from device_plugin.nvml.fake.description import parse_machine_description
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.imex_channels import imex_channel_path, scan_imex_channels
from device_plugin.nvml.protocol import ImexChannelSource
from device_plugin.nvml.real.backend import RealNvml
from tests.nvml.nvml_standin import NvmlStandin

CLUSTER = "4b1d7c2e-93a0-4f6e-8d25-0c6e9f2a7b13"


def machine(
    fabric: dict[str, Any] | None = None, gpu_fabric: dict[int, dict[str, Any]] | None = None, **top: Any
) -> Any:
    doc: dict[str, Any] = {"name": "t", "gpus": [{"model": "NVIDIA GB200", "memory_mib": 189471} for _ in range(4)]}
    if fabric is not None:
        doc["fabric"] = fabric
    for index, keys in (gpu_fabric or {}).items():
        doc["gpus"][index]["fabric"] = keys
    doc.update(top)
    return parse_machine_description(doc)


# --- the value type ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("info", "attached"),
    [
        (FabricInfo(FabricState.COMPLETED, CLUSTER, 1), True),
        (FabricInfo(FabricState.IN_PROGRESS, CLUSTER, 1), False),
        (FabricInfo(FabricState.NOT_STARTED, CLUSTER, 1), False),
        (FabricInfo(FabricState.COMPLETED, CLUSTER, 1, status=6), False),
        (FabricInfo(FabricState.COMPLETED, ZERO_UUID, 1), False),
        (NO_FABRIC, False),
    ],
    ids=["completed", "in-progress", "not-started", "completed-with-error-status", "no-cluster-uuid", "no-fabric"],
)
def test_attached_needs_completed_success_and_a_cluster(info: FabricInfo, attached: bool) -> None:
    assert info.attached is attached


def test_clique_is_cluster_uuid_dot_decimal_clique_id_in_lower_case() -> None:
    info = FabricInfo(FabricState.COMPLETED, CLUSTER.upper(), 32766)
    assert info.clique == f"{CLUSTER}.32766"


def test_from_nvml_reads_the_sixteen_uuid_bytes_in_order() -> None:
    raw = bytes.fromhex(CLUSTER.replace("-", ""))
    assert fabric_from_nvml(3, raw, 7, 0) == FabricInfo(FabricState.COMPLETED, CLUSTER, 7)


@pytest.mark.parametrize(("state", "raw"), [(9, bytes(16)), (3, bytes(15))], ids=["unknown-state", "short-uuid"])
def test_from_nvml_refuses_what_nvml_does_not_define(state: int, raw: bytes) -> None:
    with pytest.raises(ValueError):
        fabric_from_nvml(state, raw, 0, 0)


# --- machine descriptions ----------------------------------------------------------------------------


def test_without_fabric_keys_every_gpu_has_no_fabric() -> None:
    assert {gpu.fabric for gpu in machine().gpus} == {NO_FABRIC}


def test_machine_fabric_applies_to_every_gpu_and_a_gpu_overrides_its_keys() -> None:
    desc = machine({"cluster_uuid": CLUSTER, "clique_id": 5}, {2: {"state": "in_progress"}})
    assert [gpu.fabric.state for gpu in desc.gpus] == [
        FabricState.COMPLETED,
        FabricState.COMPLETED,
        FabricState.IN_PROGRESS,
        FabricState.COMPLETED,
    ]
    assert {gpu.fabric.clique for gpu in desc.gpus} == {f"{CLUSTER}.5"}


@pytest.mark.parametrize(
    ("fabric", "gpu_fabric", "field"),
    [
        ({"cluster_uuid": "rack-1"}, None, "fabric.cluster_uuid"),
        ({"clique_id": 5}, None, "fabric.cluster_uuid"),
        ({"cluster_uuid": CLUSTER, "clique_id": -1}, None, "fabric.clique_id"),
        ({"cluster_uuid": CLUSTER, "clique_id": 2**32}, None, "fabric.clique_id"),
        ({"cluster_uuid": CLUSTER, "state": "done"}, None, "fabric.state"),
        ({"cluster_uuid": CLUSTER, "status": "ok"}, None, "fabric.status"),
        ({"cluster_uuid": CLUSTER, "partition": 1}, None, "fabric.partition"),
        (None, {1: {"clique_id": 3}}, "gpus[1].fabric.cluster_uuid"),
        (None, {3: {"cluster_uuid": CLUSTER, "state": 3}}, "gpus[3].fabric.state"),
    ],
    ids=[
        "uuid-not-a-uuid",
        "completed-without-cluster",
        "negative-clique",
        "clique-over-32-bits",
        "unknown-state",
        "status-not-a-number",
        "unknown-key",
        "gpu-completed-without-cluster",
        "state-as-number",
    ],
)
def test_bad_fabric_keys_name_the_field(
    fabric: dict[str, Any] | None, gpu_fabric: dict[int, dict[str, Any]] | None, field: str
) -> None:
    with pytest.raises(MachineDescriptionError) as caught:
        machine(fabric, gpu_fabric)
    assert caught.value.field == field


def test_a_registration_not_yet_completed_needs_no_cluster_uuid() -> None:
    desc = machine({"state": "not_started"})
    assert desc.gpus[0].fabric == FabricInfo(FabricState.NOT_STARTED)


@pytest.mark.parametrize(
    ("raw", "field"),
    [([0, 0], "imex_channels"), ([-1], "imex_channels[0]"), ([0, 2048], "imex_channels[1]"), ("0", "imex_channels")],
    ids=["duplicate", "negative", "beyond-2047", "not-a-list"],
)
def test_bad_imex_channels_name_the_field(raw: object, field: str) -> None:
    with pytest.raises(MachineDescriptionError) as caught:
        machine(imex_channels=raw)
    assert caught.value.field == field


# --- the fake backend -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "clique"), [("gb200-nvl72-tray-a", f"{CLUSTER}.1"), ("gb200-nvl72-tray-b", f"{CLUSTER}.2")], ids=str
)
def test_shipped_trays_are_registered_in_their_clique_with_channel_zero(name: str, clique: str) -> None:
    fake = FakeNvml.from_machine(name)
    infos = [fake.fabric_info(gpu.index) for gpu in fake.gpus()]
    assert len(infos) == 4
    assert all(info.attached for info in infos)
    assert {info.clique for info in infos} == {clique}
    assert isinstance(fake, ImexChannelSource)
    assert fake.imex_channels(Path("/nonexistent")) == frozenset({0})


def test_fake_fabric_info_for_an_absent_gpu_is_an_nvml_error() -> None:
    fake = FakeNvml.from_machine("gb200-nvl72-tray-a")
    with pytest.raises(NvmlError) as caught:
        fake.fabric_info(4)
    assert caught.value.call == "nvmlDeviceGetGpuFabricInfoV"


# --- the real backend over the stand-in library --------------------------------------------------------------


def real_over(machine_name: str, tmp_path: Path, **standin: Any) -> tuple[RealNvml, FakeNvml, NvmlStandin]:
    fake = FakeNvml.from_machine(machine_name)
    library = NvmlStandin(fake, **standin)
    library.write_sysfs(tmp_path)
    return RealNvml(tmp_path, library=library), fake, library


@pytest.mark.parametrize(
    ("calls", "used"),
    [(("V", "v1"), "GpuFabricInfoV"), (("v1",), "GpuFabricInfo")],
    ids=["versioned-call", "older-library-falls-back"],
)
@pytest.mark.parametrize("machine_name", ["gb200-nvl72-tray-a", "gb200-nvl72-tray-b", "hgx-h100"])
def test_real_backend_reports_the_fabric_the_library_fills_in(
    tmp_path: Path, machine_name: str, calls: tuple[str, ...], used: str
) -> None:
    real, fake, library = real_over(machine_name, tmp_path, fabric_calls=calls)
    assert [real.fabric_info(g.index) for g in fake.gpus()] == [fake.fabric_info(g.index) for g in fake.gpus()]
    assert set(library.fabric_calls_made) == {used}


def test_a_library_without_either_call_has_no_fabric(tmp_path: Path) -> None:
    real, _, library = real_over("gb200-nvl72-tray-a", tmp_path, fabric_calls=())
    assert real.fabric_info(0) == NO_FABRIC
    assert library.fabric_calls_made == []


def test_a_driver_without_the_versioned_symbol_falls_back_to_the_older_call(tmp_path: Path) -> None:
    real, fake, library = real_over("gb200-nvl72-tray-b", tmp_path)

    def symbol_missing(handle: int, pointer: Any) -> int:
        library.fabric_calls_made.append("V missing")
        raise library.NVMLError(13)  # NVML_ERROR_FUNCTION_NOT_FOUND: the driver's library lacks the symbol

    library.nvmlDeviceGetGpuFabricInfoV = symbol_missing  # type: ignore[method-assign]
    assert real.fabric_info(1) == fake.fabric_info(1)
    assert library.fabric_calls_made == ["V missing", "GpuFabricInfo"]


def test_a_fabric_call_failure_is_an_error_naming_call_gpu_and_code(tmp_path: Path) -> None:
    real, _, _ = real_over("gb200-nvl72-tray-a", tmp_path, fabric_error=15)  # NVML_ERROR_GPU_IS_LOST
    with pytest.raises(NvmlError) as caught:
        real.fabric_info(2)
    assert (caught.value.call, caught.value.device, caught.value.code) == ("nvmlDeviceGetGpuFabricInfoV", "GPU 2", 15)


# --- IMEX channel device nodes on a real node ----------------------------------------------------------------


def test_scan_counts_character_devices_named_channel_n_only(tmp_path: Path) -> None:
    channels = tmp_path / "nvidia-caps-imex-channels"
    channels.mkdir()
    os.symlink("/dev/null", channels / "channel0")  # /dev/null is a character device
    os.symlink("/dev/null", channels / "channel7")
    (channels / "channel1").write_text("")  # a regular file is no device node
    os.symlink("/dev/null", channels / "channel01")  # not a name the driver uses
    os.symlink(tmp_path / "gone", channels / "channel3")  # dangling
    assert scan_imex_channels(tmp_path) == frozenset({0, 7})


def test_scan_without_the_directory_finds_none(tmp_path: Path) -> None:
    assert scan_imex_channels(tmp_path) == frozenset()


def test_real_backend_reads_channels_under_its_dev_root(tmp_path: Path) -> None:
    real, _, _ = real_over("single-gpu", tmp_path / "sys")
    (tmp_path / "dev" / "nvidia-caps-imex-channels").mkdir(parents=True)
    os.symlink("/dev/null", tmp_path / "dev" / "nvidia-caps-imex-channels" / "channel0")
    assert real.imex_channels(tmp_path / "dev") == frozenset({0})
    assert imex_channel_path(0) == "/dev/nvidia-caps-imex-channels/channel0"
