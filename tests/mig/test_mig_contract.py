"""The MIG part of the NvmlBackend contract, on every shipped machine and on the real backend (marker gpu).

On a real GPU node this reads the MIG state only; it never changes it.
"""

from __future__ import annotations

import pytest

from device_plugin.mig.discovery import discover
from device_plugin.mig.render import render_mig_tree
from device_plugin.mig.strategy import build_resources
from device_plugin.nvml.mig_types import mig_device_sort_key
from device_plugin.nvml.protocol import NvmlBackend


def test_mig_devices_belong_to_their_parent_and_do_not_overlap(backend: NvmlBackend) -> None:
    seen: set[str] = set()
    for gpu in backend.gpus():
        mode = backend.mig_mode(gpu.index)
        devices = backend.mig_devices(gpu.index)
        if mode is None or not mode.current:
            assert devices == ()
            continue
        assert list(devices) == sorted(devices, key=mig_device_sort_key)
        slots: set[int] = set()
        for mig in devices:
            assert mig.uuid.startswith("MIG-") and mig.uuid not in seen
            seen.add(mig.uuid)
            assert (mig.parent_index, mig.parent_uuid) == (gpu.index, gpu.uuid)
            assert 0 < mig.memory_mib <= gpu.memory_mib and mig.multiprocessor_count > 0
            assert "g." in mig.profile and mig.profile.split("g.")[1].split("gb")[0].isdigit()
            if mig.placement_start >= 0:
                span = set(range(mig.placement_start, mig.placement_start + mig.placement_size))
                assert not span & slots, f"{mig.uuid} overlaps another GPU instance"
                slots |= span


@pytest.mark.parametrize("strategy", ["none", "mixed"])
def test_strategies_never_advertise_a_device_twice(backend: NvmlBackend, strategy: str) -> None:
    inventory = discover(backend)
    resources = build_resources(inventory.gpus, inventory.devices_by_gpu, strategy)
    ids = [d.id for devices in resources.values() for d in devices]
    assert len(ids) == len(set(ids))
    numa = {gpu.index: gpu.numa_node for gpu in inventory.gpus}
    assert all(d.numa_node == numa[d.gpu_indices[0]] for devices in resources.values() for d in devices)


def test_tree_renders(backend: NvmlBackend) -> None:
    assert render_mig_tree(backend).count("\nGPU ") == len(backend.gpus())
