"""labelsFile is refused in every kubelet directory we serve in, and on the DRA driver's checkpoint.

Reproduces issue 18 item 7: a labelsFile pointing at the DRA checkpoint (plugins/<driver>/checkpoint.json)
or anywhere under the kubelet's plugins/ and plugins_registry/ overwrote what lies there, and every later
start exited 1. Refused at load (exit 2, the field named), on a hot reload (running config kept), and at
write time, with paths compared as written and with symlinks followed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from device_plugin.cli import main
from device_plugin.config.file_reload import ConfigFileReload
from device_plugin.config.loader import ConfigSources, load_config
from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.core.errors import ConfigError
from device_plugin.node.reporting import labels_writer

DRIVER = DEFAULT_DRA_DRIVER_NAME
FIELD = "gpuDevicePlugin.labelsFile"


@dataclass
class Kubelet:
    root: Path  # the kubelet dir: device-plugins/, plugins/, plugins_registry/ beside each other
    elsewhere: Path

    @property
    def device_plugins(self) -> Path:
        return self.root / "device-plugins"

    @property
    def checkpoint(self) -> Path:
        return self.root / "plugins" / DRIVER / "checkpoint.json"


@pytest.fixture
def kubelet(tmp_path: Path) -> Kubelet:
    k = Kubelet(tmp_path / "kubelet", tmp_path / "features.d")
    for directory in (k.device_plugins, k.checkpoint.parent, k.root / "plugins_registry", k.elsewhere):
        directory.mkdir(parents=True)
    k.checkpoint.write_text('{"version": 1}')
    return k


def onto_the_dra_checkpoint(k: Kubelet) -> Path:
    return k.checkpoint


def beside_the_dra_checkpoint(k: Kubelet) -> Path:
    return k.checkpoint.parent / "labels"


def in_plugins(k: Kubelet) -> Path:
    return k.root / "plugins" / "labels"


def in_plugins_registry(k: Kubelet) -> Path:
    return k.root / "plugins_registry" / "labels"


def a_symlink_onto_the_dra_checkpoint(k: Kubelet) -> Path:
    (k.elsewhere / "labels").symlink_to(k.checkpoint)
    return k.elsewhere / "labels"


def through_a_symlink_to_plugins_registry(k: Kubelet) -> Path:
    (k.elsewhere / "reg").symlink_to(k.root / "plugins_registry")
    return k.elsewhere / "reg" / "labels"


REFUSED: list[tuple[str, Callable[[Kubelet], Path]]] = [
    ("onto-the-dra-checkpoint", onto_the_dra_checkpoint),
    ("beside-the-dra-checkpoint", beside_the_dra_checkpoint),
    ("in-plugins", in_plugins),
    ("in-plugins-registry", in_plugins_registry),
    ("a-symlink-onto-the-dra-checkpoint", a_symlink_onto_the_dra_checkpoint),
    ("through-a-symlink-to-plugins-registry", through_a_symlink_to_plugins_registry),
]


def env_for(k: Kubelet, labels: Path) -> dict[str, str]:
    return {"LABELS_FILE": str(labels), "DEVICE_PLUGIN_DIR": str(k.device_plugins), "PLUGIN_MODE": "dra"}


@pytest.mark.parametrize("make", [c[1] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_load_refuses_the_target_naming_the_field(kubelet: Kubelet, make: Callable[[Kubelet], Path]) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(env=env_for(kubelet, make(kubelet)))
    assert caught.value.field == FIELD and "lies in" in caught.value.message, str(caught.value)
    assert kubelet.checkpoint.read_text() == '{"version": 1}'


@pytest.mark.parametrize("make", [c[1] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_the_runtime_writer_refuses_it_at_write_time(kubelet: Kubelet, make: Callable[[Kubelet], Path]) -> None:
    writer = labels_writer(str(make(kubelet)), kubelet.device_plugins)
    assert writer is not None
    with pytest.raises(ConfigError, match="lies in"):
        writer.write({"nvidia.com/gpu.count": "8"})
    assert kubelet.checkpoint.read_text() == '{"version": 1}'


def test_a_reload_onto_the_dra_checkpoint_keeps_the_running_config(
    kubelet: Kubelet, caplog: pytest.LogCaptureFixture
) -> None:
    config_file = kubelet.elsewhere / "config.yaml"
    config_file.write_text(f"gpuDevicePlugin:\n  labelsFile: {kubelet.elsewhere / 'labels'}\n")
    sources = ConfigSources(config_file, {"DEVICE_PLUGIN_DIR": str(kubelet.device_plugins)})
    running = sources.load()
    reload = ConfigFileReload(sources.load, config_file)
    config_file.write_text(f"gpuDevicePlugin:\n  labelsFile: {kubelet.checkpoint}\n")
    with caplog.at_level(logging.ERROR):
        assert reload.reloaded(running) is running
    assert f"{FIELD}: " in caplog.text and "keeping the running config" in caplog.text


def test_a_path_beside_the_kubelet_dirs_is_fine(kubelet: Kubelet) -> None:
    labels = kubelet.root / "features.d" / "gpu"  # inside the kubelet dir, but not one we serve in
    assert load_config(env=env_for(kubelet, labels)).daemon.labels_file == str(labels)


@pytest.mark.parametrize("make", [c[1] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_the_labels_command_refuses_it_as_output(
    kubelet: Kubelet, make: Callable[[Kubelet], Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("DEVICE_PLUGIN_DIR", str(kubelet.device_plugins))
    monkeypatch.delenv("CONFIG_FILE", raising=False)
    assert main(["labels", "--machine", "single-gpu", "--output", str(make(kubelet))]) == 2
    assert "--output: " in capsys.readouterr().err
    assert kubelet.checkpoint.read_text() == '{"version": 1}'
