"""The composition root: whole GPUs as nvidia.com/gpu, and honest refusal of what is not built yet."""

from __future__ import annotations

import pytest

from device_plugin.composition import GPU_RESOURCE, build_resources
from device_plugin.config import load_config
from device_plugin.errors import ConfigError
from device_plugin.nvml.catalog import open_backend


@pytest.mark.parametrize("machine", ["dgx1-v100", "single-gpu", "island-16gpu"])
def test_every_gpu_is_one_device_with_uuid_index_and_numa(machine: str) -> None:
    backend = open_backend(machine)
    (resource,) = build_resources(backend, load_config())
    assert resource.resource_name == GPU_RESOURCE
    devices = resource.snapshot().devices
    assert [(d.id, d.gpu_indices, d.numa_node) for d in devices] == [
        (g.uuid, (g.index,), g.numa_node) for g in backend.gpus()
    ]


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"MIG_STRATEGY": "mixed"}, "flags.migStrategy"),
        ({"DEVICE_LIST_STRATEGY": "cdi-cri"}, "flags.plugin.deviceListStrategy"),
        ({"DEVICE_ID_STRATEGY": "index"}, "flags.plugin.deviceIDStrategy"),
        ({"PASS_DEVICE_SPECS": "true"}, "flags.plugin.passDeviceSpecs"),
    ],
    ids=["mig", "cdi", "index-ids", "device-specs"],
)
def test_settings_not_built_yet_are_refused_naming_the_field(env: dict, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build_resources(open_backend("single-gpu"), load_config(env=env))
    assert caught.value.field == field
