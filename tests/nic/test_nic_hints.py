"""gpuDevicePlugin.nicHints: Allocate lists the allocated GPUs' GPUDirect-close NICs, off by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_plugin.allocation.response_builders import NIC_HINTS_ENV, StrategyResponseBuilder
from device_plugin.config.loader import load_config
from device_plugin.core.errors import ConfigError
from device_plugin.nvml.backends import open_backend
from tests.composed import build_resources
from tests.response_builders.cases import E, gpu, mig, s


def test_nic_hints_are_off_by_default_and_set_by_file_or_env(tmp_path: Path) -> None:
    assert load_config().daemon.nic_hints is False
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\ngpuDevicePlugin:\n  nicHints: true\n", encoding="utf-8")
    assert load_config(config_file=config).daemon.nic_hints is True
    assert load_config(env={"NIC_HINTS": "yes"}).daemon.nic_hints is True
    assert load_config(config_file=config, env={"NIC_HINTS": "off"}).daemon.nic_hints is False


@pytest.mark.parametrize(
    ("file_text", "env"),
    [("version: v1\ngpuDevicePlugin:\n  nicHints: maybe\n", {}), ("", {"NIC_HINTS": "sometimes"})],
    ids=["file: not a YAML boolean", "env: not a boolean word"],
)
def test_a_bad_nic_hints_value_names_the_field(tmp_path: Path, file_text: str, env: dict[str, str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(file_text or "version: v1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_config(config_file=config, env=env)
    assert "gpuDevicePlugin.nicHints" in str(error.value)


HINTS = {0: ("mlx5_0", "mlx5_1"), 1: ("mlx5_0", "mlx5_1"), 3: ("mlx5_3",)}

BUILDS = [
    ([gpu(3), gpu(0)], "mlx5_0,mlx5_1,mlx5_3"),
    ([gpu(0), gpu(1)], "mlx5_0,mlx5_1"),
    ([gpu(2)], None),
    ([mig(0)], "mlx5_0,mlx5_1"),
]


@pytest.mark.parametrize(
    ("devices", "expected"),
    BUILDS,
    ids=[
        "in the GPUs' order, not the request's",
        "a NIC shared by two GPUs is listed once",
        "no close NIC: no variable",
        "a MIG device gets its parent GPU's NICs",
    ],
)
def test_builder_lists_close_nics(devices: list, expected: str | None) -> None:  # type: ignore[type-arg]
    envs = StrategyResponseBuilder(s(E), nic_hints=HINTS).build(devices).envs
    assert envs.get(NIC_HINTS_ENV) == expected
    assert not any(name.startswith("NCCL_") for name in envs)


def test_builder_without_hints_sets_nothing() -> None:
    assert NIC_HINTS_ENV not in StrategyResponseBuilder(s(E)).build([gpu(0)]).envs


@pytest.mark.parametrize(
    ("env", "expected"),
    [({"NIC_HINTS": "true"}, "mlx5_2,mlx5_3"), ({}, None)],
    ids=["nicHints on: dgx-a100 GPUs 3 and 2 get their tier's two NICs", "off by default: no variable"],
)
def test_allocate_on_a_simulated_node(env: dict[str, str], expected: str | None) -> None:
    backend = open_backend("dgx-a100")
    (resource,) = build_resources(backend, load_config(env=env))
    uuid = {g.index: g.uuid for g in backend.gpus()}
    response = resource.allocate([uuid[3], uuid[2]])
    assert response.envs.get(NIC_HINTS_ENV) == expected
