"""Machine-description files and NIC sysfs attributes are read with the config file's limits.

On main 67e3c9c a 5,000-deep `nics:` section ended in a RecursionError traceback, and NIC discovery on a
FIFO or /dev/zero under a fake sysfs root hung or raised MemoryError; a machine file that is a FIFO hung.
Each case here finishes at once with a clear error (machine files) or an unknown value (sysfs).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from device_plugin.core.errors import MachineDescriptionError
from device_plugin.nvml.fake.description import MAX_MACHINE_BYTES, load_machine_file, parse_machine_yaml
from device_plugin.nvml.sysfs_nics import SysfsNics
from tests.nic.fake_sysfs import add_pci_function, add_rdma_device

GPU = "gpus: [{model: NVIDIA A100-SXM4-80GB, memory_mib: 81920}]\n"
NIC = ["0000:00:01.0", "0000:01:00.0", "0000:18:00.0"]
WAIT_S = 10.0  # a bound for a loaded machine: the point is "finishes", not how fast


def _finishes(call: Callable[[], object]) -> object:
    """call() on a thread; fails the test (instead of hanging it) when it does not finish."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as error:  # handed to the test
            result.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WAIT_S)
    assert not thread.is_alive(), f"still running after {WAIT_S} s (blocked on a read?)"
    return result[0]


def _deep(depth: int) -> str:
    return "name: deep\n" + GPU + "nics: " + "[" * depth + "]" * depth + "\n"


@pytest.mark.parametrize("depth", [100, 5000], ids=["100-deep", "5000-deep"])
def test_a_deeply_nested_nics_section_is_a_clear_error(depth: int) -> None:
    """Our cap (32 levels, the field named) or, far deeper, libyaml's own (1,000): never a RecursionError."""
    outcome = _finishes(lambda: parse_machine_yaml(_deep(depth), source="deep.yaml"))
    assert isinstance(outcome, MachineDescriptionError), repr(outcome)
    assert "nest" in outcome.message and "deep.yaml" in outcome.message, outcome.message


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _too_big(path: Path) -> None:
    path.write_text("name: big\n" + GPU + "#" * MAX_MACHINE_BYTES + "\n")


MACHINE_FILES = {
    "fifo": (_fifo, "a FIFO"),
    "dev-zero": (_dev_zero, "character device"),
    "too-big": (_too_big, "larger"),
}


@pytest.mark.parametrize("kind", sorted(MACHINE_FILES), ids=sorted(MACHINE_FILES))
def test_a_machine_file_that_is_not_a_small_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    make, said = MACHINE_FILES[kind]
    path = tmp_path / "machine.yaml"
    make(path)
    outcome = _finishes(lambda: load_machine_file(path))
    assert isinstance(outcome, MachineDescriptionError) and said in str(outcome), repr(outcome)


def test_anchors_in_a_machine_file_are_refused() -> None:
    """An alias bomb is a few hundred bytes; walking it (an error message) is gigabytes."""
    text = "name: a\ngpus:\n  - &g {model: NVIDIA A100-SXM4-80GB, memory_mib: 81920}\n  - *g\n"
    with pytest.raises(MachineDescriptionError, match="anchors and aliases"):
        parse_machine_yaml(text, source="anchors.yaml")


def _sysfs_with(tmp_path: Path, attribute: str, make: Callable[[Path], None]) -> Path:
    function = add_pci_function(tmp_path, NIC, numa_node=1)
    add_rdma_device(tmp_path, "mlx5_0", function, netdev="ib0", rates=("400 Gb/sec (4X NDR)",))
    target = function / "numa_node" if attribute == "numa_node" else tmp_path / "class/infiniband/mlx5_0/ports/1/rate"
    target.unlink()
    make(target)
    return tmp_path


SYSFS = {"fifo": _fifo, "dev-zero": _dev_zero, "huge": lambda p: p.write_bytes(b"4" * (1024 * 1024))}


@pytest.mark.parametrize("attribute", ["numa_node", "rate"], ids=["numa_node", "port-rate"])
@pytest.mark.parametrize("kind", sorted(SYSFS), ids=sorted(SYSFS))
def test_nic_discovery_on_a_hostile_sysfs_attribute_finishes_with_the_value_unknown(
    tmp_path: Path, kind: str, attribute: str
) -> None:
    root = _sysfs_with(tmp_path, attribute, SYSFS[kind])
    outcome = _finishes(lambda: SysfsNics(root).nics())
    assert isinstance(outcome, tuple), repr(outcome)
    (nic,) = outcome
    if attribute == "numa_node":
        assert nic.numa_node is None and nic.link_gbit_per_s == 400.0
    else:
        assert nic.link_gbit_per_s is None and nic.numa_node == 1
