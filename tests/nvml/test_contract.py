"""The NvmlBackend contract, run against every shipped fake machine and against the real backend.

The real backend runs only where NVML initialises (marker `gpu`); elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import itertools

import pytest

from device_plugin.core.errors import NvmlError
from device_plugin.nvml.fabric_types import ZERO_UUID, FabricInfo, FabricState
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.types import PcieLevel, normalise_pci_bus_id


def test_indices_are_contiguous_from_zero(backend: NvmlBackend) -> None:
    gpus = backend.gpus()
    assert gpus, "a backend that initialised reports at least one GPU"
    assert [gpu.index for gpu in gpus] == list(range(len(gpus)))


def test_uuids_and_bus_ids_are_unique_and_well_formed(backend: NvmlBackend) -> None:
    gpus = backend.gpus()
    assert len({gpu.uuid for gpu in gpus}) == len(gpus)
    assert len({gpu.pci_bus_id for gpu in gpus}) == len(gpus)
    assert all(gpu.uuid.startswith("GPU-") for gpu in gpus)
    assert all(gpu.pci_bus_id == normalise_pci_bus_id(gpu.pci_bus_id) for gpu in gpus)
    assert all(gpu.memory_mib > 0 and gpu.name for gpu in gpus)


def test_pcie_level_is_symmetric_and_never_closer_across_numa_nodes(backend: NvmlBackend) -> None:
    gpus = backend.gpus()
    for a, b in itertools.combinations(gpus, 2):
        level = backend.pcie_level(a.index, b.index)
        assert level == backend.pcie_level(b.index, a.index)
        if None not in (a.numa_node, b.numa_node) and a.numa_node != b.numa_node:
            assert level >= PcieLevel.NODE, f"GPUs {a.index},{b.index} on different NUMA nodes share a bridge"


def test_pcie_level_with_itself_is_refused(backend: NvmlBackend) -> None:
    with pytest.raises(NvmlError):
        backend.pcie_level(0, 0)


def test_fake_is_system_level_exactly_across_sockets(backend: NvmlBackend) -> None:
    if not isinstance(backend, FakeNvml):
        pytest.skip("socket membership is only known for a described machine")
    socket = {gpu.index: gpu.pcie[0] for gpu in backend.description.gpus}
    for a, b in itertools.combinations(socket, 2):
        assert (backend.pcie_level(a, b) == PcieLevel.SYSTEM) == (socket[a] != socket[b])


def test_nvlinks_are_numbered_and_reach_a_gpu_or_a_switch(backend: NvmlBackend) -> None:
    gpus = backend.gpus()
    bus_ids = {gpu.pci_bus_id for gpu in gpus}
    for gpu in gpus:
        links = backend.nvlinks(gpu.index)
        numbers = [link.link for link in links]
        assert numbers == sorted(set(numbers))
        for link in links:
            if not link.active:
                continue
            assert link.remote_pci_bus_id != gpu.pci_bus_id
            assert link.remote_is_nvswitch or link.remote_pci_bus_id in bus_ids


def test_direct_links_are_reported_from_both_ends(backend: NvmlBackend) -> None:
    gpus = backend.gpus()
    by_bus = {gpu.pci_bus_id: gpu.index for gpu in gpus}
    counts: dict[tuple[int, int], int] = {}
    for gpu in gpus:
        for link in backend.nvlinks(gpu.index):
            if link.active and not link.remote_is_nvswitch:
                pair = (gpu.index, by_bus[link.remote_pci_bus_id])
                counts[pair] = counts.get(pair, 0) + 1
    assert all(counts.get((b, a)) == n for (a, b), n in counts.items())


def test_system_info_is_filled(backend: NvmlBackend) -> None:
    info = backend.system_info()
    assert info.driver_version
    assert info.cuda_driver_version == "" or info.cuda_driver_version.count(".") == 1


def test_device_minors_are_distinct_non_negative_numbers(backend: NvmlBackend) -> None:
    minors = [backend.device_minor(gpu.index) for gpu in backend.gpus()]
    assert all(m >= 0 for m in minors) and len(set(minors)) == len(minors)


def test_close_is_idempotent(backend: NvmlBackend) -> None:
    backend.close()
    backend.close()


def test_fabric_info_for_every_gpu_and_attached_means_a_cluster(backend: NvmlBackend) -> None:
    for gpu in backend.gpus():
        info = backend.fabric_info(gpu.index)
        assert isinstance(info, FabricInfo)
        if info.attached:
            assert info.state is FabricState.COMPLETED and info.cluster_uuid != ZERO_UUID
    with pytest.raises(NvmlError):
        backend.fabric_info(len(backend.gpus()))
