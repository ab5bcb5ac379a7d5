"""The composition root: config + machine -> the resources served, with the right policies and answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_plugin.config.loader import load_config
from device_plugin.core.errors import ConfigError
from device_plugin.core.names import GPU_RESOURCE
from device_plugin.dp.composition import build_node
from device_plugin.nvml.backends import open_backend
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.real.backend import RealNvml
from tests.composed import build_resources
from tests.nvml.nvml_standin import NvmlStandin

TIME_SLICING = """
version: v1
sharing:
  timeSlicing:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""


@pytest.mark.parametrize("machine", ["dgx1-v100", "single-gpu", "island-16gpu"])
def test_every_gpu_is_one_device_with_uuid_index_and_numa(machine: str) -> None:
    backend = open_backend(machine)
    (resource,) = build_resources(backend, load_config())
    assert resource.resource_name == GPU_RESOURCE
    devices = resource.snapshot().devices
    assert [(d.id, d.gpu_indices, d.numa_node) for d in devices] == [
        (g.uuid, (g.index,), g.numa_node) for g in backend.gpus()
    ]


def test_whole_gpus_are_chosen_by_topology_not_by_index() -> None:
    # dgx1-v100: GPUs 0,3 share 2 NVLinks; 0,1 only one. Lowest-index would say 0,1.
    backend = open_backend("dgx1-v100")
    (resource,) = build_resources(backend, load_config())
    uuid = {g.index: g.uuid for g in backend.gpus()}
    chosen = resource.preferred_allocation([uuid[i] for i in (1, 0, 3)], [uuid[0]], 2)
    assert set(chosen) == {uuid[0], uuid[3]}


def test_decision_hook_names_the_resource() -> None:
    seen = []
    node = build_node(open_backend("dgx1-v100"), load_config(), on_decision=lambda name, d: seen.append((name, d)))
    (resource,) = node.resources
    ids = [d.id for d in resource.snapshot().devices]
    resource.preferred_allocation(ids, [], 4)
    assert [(name, d.size, d.optimal) for name, d in seen] == [(GPU_RESOURCE, 4, True)]


def test_time_slicing_config_serves_replicas(tmp_path: Path) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(TIME_SLICING)
    node = build_node(open_backend("hgx-h100"), load_config(config_file=config_file))
    (resource,) = node.resources
    devices = resource.snapshot().devices
    assert len(devices) == 8 * 4 and all("::" in d.id for d in devices)
    assert node.replica_memory_mib == {GPU_RESOURCE: 81559 // 4}
    # Two replicas land on two distinct GPUs, and NVIDIA_VISIBLE_DEVICES names both GPUs.
    chosen = resource.preferred_allocation([d.id for d in devices], [], 2)
    allocation = resource.allocate(chosen)
    assert len(allocation.envs["NVIDIA_VISIBLE_DEVICES"].split(",")) == 2


@pytest.mark.parametrize(
    ("env", "check"),
    [
        ({"DEVICE_LIST_STRATEGY": "cdi-cri"}, lambda a, g: a.cdi_devices == (f"nvidia.com/gpu={g.uuid}",)),
        ({"DEVICE_ID_STRATEGY": "index"}, lambda a, g: a.envs["NVIDIA_VISIBLE_DEVICES"] == str(g.index)),
        ({"DEVICE_LIST_STRATEGY": "envvar"}, lambda a, g: a.envs["NVIDIA_VISIBLE_DEVICES"] == g.uuid),
    ],
    ids=["cdi-cri-names-the-gpu", "index-strategy-uses-nvml-index", "envvar-default-uses-uuid"],
)
def test_device_list_strategies_reach_allocate(env: dict, check) -> None:
    backend = open_backend("workstation-4gpu")
    (resource,) = build_resources(backend, load_config(env=env))
    gpu = backend.gpus()[2]
    assert check(resource.allocate([gpu.uuid]), gpu)


def test_pass_device_specs_uses_the_injected_dev_root(tmp_path: Path) -> None:
    for name in ("nvidia2", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    backend = open_backend("workstation-4gpu")
    (resource,) = build_resources(backend, load_config(env={"PASS_DEVICE_SPECS": "true"}), dev_root=tmp_path)
    specs = {s.container_path for s in resource.allocate([backend.gpus()[2].uuid]).device_specs}
    assert specs == {"/dev/nvidia2", "/dev/nvidiactl", "/dev/nvidia-uvm"}


# Resource names and counts per MIG strategy: tests/daemon/test_resources_over_kubelet.py (over the kubelet).


def test_mig_requests_spread_over_parents_and_name_mig_uuids() -> None:
    backend = open_backend("a100-mig-7x1g")
    (resource,) = build_resources(backend, load_config(env={"MIG_STRATEGY": "mixed"}))
    devices = resource.snapshot().devices
    chosen = resource.preferred_allocation([d.id for d in devices], [], 4)
    parents = {next(d.gpu_indices for d in devices if d.id == c) for c in chosen}
    assert len(parents) == 4
    visible = resource.allocate(chosen).envs["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert sorted(visible) == sorted(chosen) and all(v.startswith("MIG-") for v in visible)


def test_mig_single_refuses_a_mixed_layout_naming_the_field() -> None:
    with pytest.raises(ConfigError) as caught:
        build_resources(open_backend("h100-mig-mixed"), load_config(env={"MIG_STRATEGY": "single"}))
    assert caught.value.field == "flags.migStrategy"


def test_a_rebuild_with_the_same_topology_reuses_the_precomputed_allocator() -> None:
    backend = open_backend("island-16gpu")
    first = build_node(backend, load_config())
    again = build_node(backend, load_config(env={"DEVICE_ID_STRATEGY": "index"}), previous=first)
    assert again.allocator is first.allocator
    other = build_node(open_backend("dgx1-v100"), load_config(), previous=first)
    assert other.allocator is not first.allocator and other.allocator is not None


@pytest.mark.parametrize(
    ("sharing", "flags", "expect_gpus"),
    [
        ("{requireDistinctGPUs: true, resources: [{name: nvidia.com/gpu, replicas: 2}]}", "", 2),
        ("{resources: [{name: nvidia.com/gpu, replicas: 2, allocationPolicy: packed}]}", "", 1),
        (
            "{resources: [{name: nvidia.com/gpu, replicas: 2}]}",
            "flags: {plugin: {sharedDevicesAllocationPolicy: packed}}",
            1,
        ),
        ("{resources: [{name: nvidia.com/gpu, replicas: 2}]}", "", 2),
    ],
    ids=["distinct-gpus-from-the-file", "packed-per-resource", "packed-from-nvidia-flag", "distributed-by-default"],
)
def test_sharing_options_load_from_a_config_file_and_take_effect(
    tmp_path: Path, sharing: str, flags: str, expect_gpus: int
) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(f"version: v1\n{flags}\nsharing:\n  timeSlicing: {sharing}\n")
    (resource,) = build_resources(open_backend("workstation-4gpu"), load_config(config_file=config_file))
    devices = resource.snapshot().devices
    chosen = resource.preferred_allocation([d.id for d in devices], [], 2)
    gpus = {next(d.gpu_indices for d in devices if d.id == c) for c in chosen}
    assert len(gpus) == expect_gpus


def test_index_strategy_names_a_mig_device_by_parent_and_nvml_slot() -> None:
    backend = open_backend("h100-mig-mixed")
    resources = build_resources(backend, load_config(env={"MIG_STRATEGY": "mixed", "DEVICE_ID_STRATEGY": "index"}))
    (big,) = [r for r in resources if r.resource_name == "nvidia.com/mig-3g.40gb"][:1]
    device = big.snapshot().devices[0]
    mig = next(m for m in backend.mig_devices(device.gpu_indices[0]) if m.uuid == device.id)
    assert big.allocate([device.id]).envs["NVIDIA_VISIBLE_DEVICES"] == f"{mig.parent_index}:{mig.slot}"


def test_pass_device_specs_names_the_driver_minor_not_the_nvml_index(tmp_path: Path) -> None:
    fake = FakeNvml.from_machine("workstation-4gpu")
    real = RealNvml(tmp_path / "sys", library=NvmlStandin(fake))  # the stand-in's minors run in reverse
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl"):
        (dev / name).touch()
    (resource,) = build_resources(real, load_config(env={"PASS_DEVICE_SPECS": "true"}), dev_root=dev)
    specs = {s.container_path for s in resource.allocate([fake.gpus()[0].uuid]).device_specs}
    assert specs == {"/dev/nvidia3", "/dev/nvidiactl"}
