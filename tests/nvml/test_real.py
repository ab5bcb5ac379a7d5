"""RealNvml without a GPU: the sysfs NUMA reader, version formatting, NVML absence, and its translation of
a pynvml-shaped library (tests/nvml/nvml_standin.py) back into what the described machine is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from device_plugin.core.errors import NvmlError, NvmlUnavailableError
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.real.backend import RealNvml, format_cuda_version, read_numa_node
from device_plugin.nvml.types import PcieLevel
from tests.nvml.nvml_standin import NVML_ERROR_NOT_SUPPORTED, NvmlStandin

BDF = "0000:06:00.0"


def sysfs_with(tmp_path: Path, content: str | None) -> Path:
    device = tmp_path / "bus" / "pci" / "devices" / BDF
    device.mkdir(parents=True)
    if content is not None:
        (device / "numa_node").write_text(content, encoding="ascii")
    return tmp_path


@pytest.mark.parametrize(
    ("content", "node"),
    [("0\n", 0), ("3\n", 3), ("-1\n", None), (None, None)],
    ids=["node-0", "node-3", "minus-one-means-none", "missing-file"],
)
def test_read_numa_node(tmp_path: Path, content: str | None, node: int | None) -> None:
    assert read_numa_node(sysfs_with(tmp_path, content), BDF) == node


def test_read_numa_node_takes_nvml_bus_id_form(tmp_path: Path) -> None:
    assert read_numa_node(sysfs_with(tmp_path, "1\n"), "00000000:06:00.0") == 1


def test_read_numa_node_refuses_garbage(tmp_path: Path) -> None:
    with pytest.raises(NvmlError, match="not an integer"):
        read_numa_node(sysfs_with(tmp_path, "north\n"), BDF)


@pytest.mark.parametrize(
    ("value", "text"), [(12040, "12.4"), (11080, "11.8"), (12000, "12.0"), (13000, "13.0")], ids=str
)
def test_format_cuda_version(value: int, text: str) -> None:
    assert format_cuda_version(value) == text


def nvml_available() -> bool:
    try:
        RealNvml().close()
    except NvmlUnavailableError:
        return False
    return True


@pytest.mark.skipif(nvml_available(), reason="NVML works on this machine; the no-GPU path cannot be exercised")
def test_without_nvml_construction_fails_with_a_helpful_message() -> None:
    with pytest.raises(NvmlUnavailableError) as caught:
        RealNvml()
    message = str(caught.value)
    assert caught.value.call == "nvmlInit"
    assert caught.value.code is not None
    assert "NVIDIA driver" in message
    assert "--machine" in message


# --- RealNvml's translation, over a pynvml-shaped stand-in built from a shipped machine ---------------


def real_over(machine: str, sys_root: Path, **standin: Any) -> tuple[RealNvml, FakeNvml, NvmlStandin]:
    fake = FakeNvml.from_machine(machine)
    library = NvmlStandin(fake, **standin)
    library.write_sysfs(sys_root)
    return RealNvml(sys_root, library=library), fake, library


@pytest.mark.parametrize("machine", shipped_machine_names())
def test_real_backend_reports_what_the_library_says(tmp_path: Path, machine: str) -> None:
    real, fake, _ = real_over(machine, tmp_path)
    assert real.gpus() == fake.gpus()
    assert real.system_info() == fake.system_info()
    for gpu in fake.gpus():
        assert real.nvlinks(gpu.index) == fake.nvlinks(gpu.index)
        for other in fake.gpus()[gpu.index + 1 :]:
            assert real.pcie_level(gpu.index, other.index) == fake.pcie_level(gpu.index, other.index)


@pytest.mark.parametrize("machine", ["dgx-a100", "dgx1-v100"])
def test_without_remote_device_type_switches_are_the_remotes_that_are_no_gpu(tmp_path: Path, machine: str) -> None:
    real, fake, _ = real_over(machine, tmp_path, knows_remote_type=False)
    assert [real.nvlinks(i) for i in range(8)] == [fake.nvlinks(i) for i in range(8)]


def test_library_errors_become_nvml_errors_naming_call_and_device(tmp_path: Path) -> None:
    real, _, _ = real_over("single-gpu", tmp_path)
    with pytest.raises(NvmlError) as caught:
        real.nvlinks(4)
    assert (caught.value.call, caught.value.device, caught.value.code) == ("nvmlDeviceGetHandleByIndex", "GPU 4", 2)


def test_init_failure_is_unavailable_with_the_code(tmp_path: Path) -> None:
    with pytest.raises(NvmlUnavailableError, match="stand-in NVML error 9") as caught:
        real_over("single-gpu", tmp_path, init_error=9)
    assert caught.value.code == 9


def test_close_shuts_nvml_down_once_and_later_calls_fail(tmp_path: Path) -> None:
    real, _, library = real_over("single-gpu", tmp_path)
    real.close()
    real.close()
    assert library.shutdowns == 1
    with pytest.raises(NvmlError, match="closed"):
        real.gpus()


class _HiddenPcieTree(NvmlStandin):
    """A hypervisor that hides the PCIe tree of passed-through GPUs."""

    def nvmlDeviceGetTopologyCommonAncestor(self, handle_a: int, handle_b: int) -> int:
        raise self.NVMLError(NVML_ERROR_NOT_SUPPORTED)


def test_an_unknowable_pcie_ancestor_is_assumed_farthest_not_fatal(tmp_path: Path) -> None:
    real = RealNvml(tmp_path, library=_HiddenPcieTree(FakeNvml.from_machine("workstation-4gpu")))
    assert real.pcie_level(0, 1) is PcieLevel.SYSTEM
