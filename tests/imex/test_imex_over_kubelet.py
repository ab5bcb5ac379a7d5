"""IMEX channels end to end on the simulated GB200 NVL72 tray: Allocate through the kubelet stand-in for
every device-list strategy, required and not, and a node whose channel device is missing."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from device_plugin.cli import main
from device_plugin.config.loader import load_config
from device_plugin.dp.front_end import device_plugin_runtime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from tests.daemon.harness import TIMING, WAIT_S

GPU = "nvidia.com/gpu"
TRAY = "gb200-nvl72-tray-a"


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gdp-imex-", dir="/tmp"))  # short: unix socket paths are limited
    yield path
    shutil.rmtree(path, ignore_errors=True)


def tray_without_channels(tmp_path: Path) -> Path:
    """The shipped tray, but the IMEX daemon has not created channel 0."""
    text = (resources.files("device_plugin") / "machines" / f"{TRAY}.yaml").read_text(encoding="utf-8")
    path = tmp_path / "tray-no-channel.yaml"
    path.write_text(text.replace("imex_channels: [0]\n", ""), encoding="utf-8")
    return path


def admit_all(machine: FakeNvml, plugin_dir: Path, config_text: str):  # type: ignore[no-untyped-def]
    config_file = plugin_dir / "config.yaml"
    config_file.write_text(f"version: v1\n{config_text}\n")
    config = load_config(config_file=config_file, env={"DEVICE_PLUGIN_DIR": str(plugin_dir), "METRICS_ADDRESS": ""})
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    daemon = device_plugin_runtime(machine, config, timing=TIMING)
    daemon.start()
    try:
        kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
        return kubelet.admit(GPU, 4).response
    finally:
        daemon.stop()
        kubelet.stop()


STRATEGIES = ["envvar", "volume-mounts", "cdi-annotations", "cdi-cri"]


@pytest.mark.parametrize("required", [False, True], ids=["optional", "required"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_hands_out_channel_zero(plugin_dir: Path, strategy: str, required: bool) -> None:
    imex = f"imex: {{channelIDs: [0], required: {str(required).lower()}}}"
    config = f"flags: {{plugin: {{deviceListStrategy: {strategy}}}}}\n{imex}"
    response = admit_all(FakeNvml.from_machine(TRAY), plugin_dir, config)
    found = {
        "envvar": response.envs.get("NVIDIA_IMEX_CHANNELS") == "0",
        "volume-mounts": any(m.container_path == "/var/run/nvidia-container-devices/imex/0" for m in response.mounts),
        "cdi-annotations": any("nvidia.com/imex-channel=0" in v.split(",") for v in response.annotations.values()),
        "cdi-cri": "nvidia.com/imex-channel=0" in [d.name for d in response.cdi_devices],
    }
    assert found == {name: name == strategy for name in STRATEGIES}


def test_without_imex_config_no_channel_is_handed_out(plugin_dir: Path) -> None:
    response = admit_all(FakeNvml.from_machine(TRAY), plugin_dir, "flags: {plugin: {deviceListStrategy: envvar}}")
    assert "NVIDIA_IMEX_CHANNELS" not in response.envs
    assert set(response.envs) == {"NVIDIA_VISIBLE_DEVICES"}


def test_a_missing_channel_not_required_serves_without_it_and_says_so(
    plugin_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    machine = FakeNvml.from_machine(tray_without_channels(tmp_path))
    with caplog.at_level(logging.WARNING):
        response = admit_all(machine, plugin_dir, "imex: {channelIDs: [0]}")
    assert "NVIDIA_IMEX_CHANNELS" not in response.envs
    assert len(response.envs["NVIDIA_VISIBLE_DEVICES"].split(",")) == 4
    warnings = [r.getMessage() for r in caplog.records if "IMEX channel 0" in r.getMessage()]
    assert warnings and "/dev/nvidia-caps-imex-channels/channel0" in warnings[0]


def test_a_missing_required_channel_refuses_to_start_with_exit_2(
    plugin_dir: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\nimex: {channelIDs: [0], required: true}\n")
    machine = tray_without_channels(tmp_path)
    argv = ["run", "--machine", str(machine), "--config", str(config), "--device-plugin-dir", str(plugin_dir)]
    assert main([*argv, "--metrics-address", ""]) == 2
    assert "config error: imex.required: IMEX channel 0" in capfd.readouterr().err
    assert not list(plugin_dir.glob("*.sock"))
