"""The mode switch and the DRA driver name: file, env and CLI, defaults, refusals naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_plugin.cli import main
from device_plugin.config.loader import load_config
from device_plugin.core.errors import ConfigError
from device_plugin.core.names import OWN_DOMAIN, foreign_owner

DEFAULT_DRIVER = f"gpu.{OWN_DOMAIN}"


def test_defaults_keep_the_device_plugin_mode_and_a_driver_name_under_our_own_domain() -> None:
    daemon = load_config().daemon
    assert (daemon.mode, daemon.driver_name) == ("device-plugin", f"gpu.{OWN_DOMAIN}")
    assert daemon.own_domain == OWN_DOMAIN and foreign_owner(OWN_DOMAIN) is None


@pytest.mark.parametrize(
    ("file_text", "env", "cli", "expected"),
    [
        ("gpuDevicePlugin: {mode: dra, driverName: gpu.example.com}\n", {}, {}, ("dra", "gpu.example.com")),
        ("gpuDevicePlugin: {mode: dra}\n", {"PLUGIN_MODE": "device-plugin"}, {}, ("device-plugin", DEFAULT_DRIVER)),
        ("", {"DRA_DRIVER_NAME": "a.b"}, {"gpuDevicePlugin.mode": "dra"}, ("dra", "a.b")),
    ],
    ids=["file", "env-beats-file", "cli-and-env"],
)
def test_mode_and_driver_name_merge_like_every_other_setting(
    tmp_path: Path, file_text: str, env: dict[str, str], cli: dict[str, str], expected: tuple[str, str]
) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text("version: v1\n" + file_text)
    daemon = load_config(config_file=config_file, env=env, cli=cli).daemon
    assert (daemon.mode, daemon.driver_name) == expected


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"PLUGIN_MODE": "both"}, "gpuDevicePlugin.mode"),
        ({"DRA_DRIVER_NAME": "GPU_Nvidia"}, "gpuDevicePlugin.driverName"),
        ({"DRA_DRIVER_NAME": "x" * 64}, "gpuDevicePlugin.driverName"),
        ({"OWN_DOMAIN": "nvidia.com"}, "gpuDevicePlugin.ownDomain"),
        ({"OWN_DOMAIN": "gpu.nvidia.com"}, "gpuDevicePlugin.ownDomain"),
        ({"OWN_DOMAIN": "kubernetes.io"}, "gpuDevicePlugin.ownDomain"),
        ({"OWN_DOMAIN": "resource.kubernetes.io"}, "gpuDevicePlugin.ownDomain"),
        ({"OWN_DOMAIN": "x.k8s.io"}, "gpuDevicePlugin.ownDomain"),
        ({"OWN_DOMAIN": "Example.org"}, "gpuDevicePlugin.ownDomain"),
        ({"OWN_DOMAIN": "example.org/x"}, "gpuDevicePlugin.ownDomain"),
    ],
    ids=[
        "unknown-mode",
        "not-a-dns-subdomain",
        "too-long",
        "own-domain-nvidias",
        "own-domain-under-nvidias",
        "own-domain-kubernetes",
        "own-domain-under-kubernetes",
        "own-domain-under-k8s",
        "own-domain-upper-case",
        "own-domain-with-a-path",
    ],
)
def test_bad_values_are_refused_naming_the_field(env: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(env=env)
    assert field in str(raised.value)


def test_run_in_dra_mode_without_node_name_refuses_naming_the_downward_api(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main(["run", "--machine", "single-gpu", "--mode", "dra", "--metrics-address", ""]) == 2
    assert "NODE_NAME is not set" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"file": "gpuDevicePlugin: {ownDomain: gpus.example.org}\n"}, "gpus.example.org"),
        ({"env": {"OWN_DOMAIN": "nvidia.example.com"}}, "nvidia.example.com"),  # only the suffix decides
        ({"cli": {"gpuDevicePlugin.ownDomain": "k8s-gpus.example.org"}}, "k8s-gpus.example.org"),
    ],
    ids=["file", "env-a-domain-merely-containing-nvidia", "cli"],
)
def test_own_domain_is_taken_from_every_source(tmp_path: Path, source: dict, expected: str) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text("version: v1\n" + source.get("file", ""))
    daemon = load_config(config_file=config_file, env=source.get("env", {}), cli=source.get("cli", {})).daemon
    assert daemon.own_domain == expected
