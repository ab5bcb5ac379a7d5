"""IMEX channels in Allocate answers: each device-list strategy's form, and the missing-channel rule."""

from __future__ import annotations

import logging

import pytest

from device_plugin.allocation.imex import ImexChannels, resolve_imex_channels
from device_plugin.allocation.response_builders import DeviceListStrategy, ResponseSettings, StrategyResponseBuilder
from device_plugin.config.imex import ImexConfig
from device_plugin.core.devices import DeviceSpec, Mount
from device_plugin.core.errors import ConfigError
from tests.response_builders.cases import NODES_4GPU, gpu

E = DeviceListStrategy.ENVVAR
V = DeviceListStrategy.VOLUME_MOUNTS
CA = DeviceListStrategy.CDI_ANNOTATIONS
CC = DeviceListStrategy.CDI_CRI
CHANNEL0 = ImexChannels((0,))
NODE = "/dev/nvidia-caps-imex-channels/channel0"


def answer(channels: ImexChannels, *strategies: DeviceListStrategy, specs: bool = False, root: str = "/"):  # type: ignore[no-untyped-def]
    settings = ResponseSettings(strategies, pass_device_specs=specs, host_dev_root=root)
    return StrategyResponseBuilder(settings, NODES_4GPU, imex=channels).build([gpu(0), gpu(1)])


def test_envvar_names_the_channel_in_nvidia_imex_channels() -> None:
    assert answer(CHANNEL0, E).envs["NVIDIA_IMEX_CHANNELS"] == "0"


def test_volume_mounts_mount_the_channel_under_the_imex_directory() -> None:
    mounts = answer(CHANNEL0, V).mounts
    assert Mount("/var/run/nvidia-container-devices/imex/0", "/dev/null", read_only=True) in mounts
    assert "NVIDIA_IMEX_CHANNELS" not in answer(CHANNEL0, V).envs


@pytest.mark.parametrize("strategy", [CA, CC], ids=["cdi-annotations", "cdi-cri"])
def test_cdi_strategies_add_the_imex_channel_cdi_device(strategy: DeviceListStrategy) -> None:
    allocation = answer(CHANNEL0, strategy)
    listed = allocation.cdi_devices if strategy is CC else tuple(",".join(allocation.annotations.values()).split(","))
    assert listed[-1] == "nvidia.com/imex-channel=0"
    assert listed[:-1] and all(name.startswith("nvidia.com/gpu=") for name in listed[:-1])


@pytest.mark.parametrize(("root", "host"), [("/", NODE), ("/run/nvidia/driver", f"/run/nvidia/driver{NODE}")])
def test_pass_device_specs_adds_the_channel_node_under_the_dev_root(root: str, host: str) -> None:
    specs = answer(CHANNEL0, E, specs=True, root=root).device_specs
    assert specs[-1] == DeviceSpec(NODE, host, "rw")


@pytest.mark.parametrize(
    "strategies",
    [(E,), (V,), (CA,), (CC,), (E, V, CA, CC)],
    ids=["envvar", "volume-mounts", "cdi-ann", "cdi-cri", "all"],
)
def test_without_channels_the_answer_is_exactly_the_one_without_imex(
    strategies: tuple[DeviceListStrategy, ...],
) -> None:
    settings = ResponseSettings(strategies, pass_device_specs=True)
    plain = StrategyResponseBuilder(settings, NODES_4GPU).build([gpu(0), gpu(1)])
    assert answer(ImexChannels(), *strategies, specs=True) == plain


@pytest.mark.parametrize(
    ("config", "present", "channels", "warned"),
    [
        (ImexConfig((0,), required=False), {0}, (0,), False),
        (ImexConfig((0,), required=True), {0, 5}, (0,), False),
        (ImexConfig((0,), required=False), set(), (), True),
        (ImexConfig((), required=True), set(), (), False),
    ],
    ids=["present", "present-required", "missing-not-required-serves-without", "none-asked"],
)
def test_resolve_keeps_present_channels_and_warns_for_missing_ones(
    config: ImexConfig, present: set[int], channels: tuple[int, ...], warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="device_plugin.allocation.imex"):
        assert resolve_imex_channels(config, present).ids == channels
    assert any("channel0" in r.getMessage() for r in caplog.records) is warned


def test_a_required_missing_channel_is_a_config_error_naming_the_device_node() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_imex_channels(ImexConfig((0,), required=True), set())
    assert caught.value.field == "imex.required"
    assert NODE in caught.value.message
