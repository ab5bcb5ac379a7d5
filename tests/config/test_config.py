"""The config file (NVIDIA's version: v1), env variables and CLI flags: validity, errors, precedence."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from device_plugin.config.loader import config_file_path, load_config
from device_plugin.config.model import Config
from device_plugin.core.errors import ConfigError

NVIDIA_EXAMPLE = """\
version: v1
flags:
  migStrategy: none
  failOnInitError: true
  nvidiaDriverRoot: /run/nvidia/driver
  plugin:
    passDeviceSpecs: false
    deviceListStrategy: envvar
    deviceIDStrategy: uuid
    cdiAnnotationPrefix: cdi.k8s.io/
    nvidiaCTKPath: /usr/bin/nvidia-ctk
    containerDriverRoot: /driver-root
  gfd:
    oneshot: false
    sleepInterval: 60s
resources:
  gpus:
    - pattern: "*"
      name: gpu
sharing:
  timeSlicing:
    renameByDefault: false
    failRequestsGreaterThanOne: false
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "check"),
    [
        ("", lambda c: replace(c, sources=()) == Config()),
        ("version: v1\n", lambda c: c.flags.mig_strategy == "none"),
        ("flags: {migStrategy: mixed}\n", lambda c: c.flags.mig_strategy == "mixed"),
        (
            NVIDIA_EXAMPLE,
            lambda c: (
                c.flags.nvidia_driver_root == "/run/nvidia/driver"
                and c.sharing.time_slicing is not None
                and c.sharing.time_slicing.resources[0].replicas == 4
            ),
        ),
        (
            "flags: {plugin: {deviceListStrategy: [envvar, cdi-cri]}}\n",
            lambda c: c.flags.plugin.device_list_strategy == ("envvar", "cdi-cri"),
        ),
        ('{"version": "v1", "flags": {"failOnInitError": false}}', lambda c: c.flags.fail_on_init_error is False),
        ("flags: {migStrategy: null}\n", lambda c: c.flags.mig_strategy == "none"),
        (
            "gpuDevicePlugin: {devicePluginDir: /d, metricsAddress: ':9400', logFormat: json}\n",
            lambda c: (
                (str(c.daemon.device_plugin_dir), c.daemon.metrics_address, c.daemon.log_format)
                == ("/d", ":9400", "json")
            ),
        ),
        ("imex: {channelIDs: [0], required: true}\n", lambda c: c.imex.required is True),
    ],
    ids=[
        "empty-file",
        "version-only",
        "mig-mixed",
        "nvidia-example-as-is",
        "strategy-list",
        "json-file",
        "null-means-default",
        "our-own-section",
        "imex",
    ],
)
def test_valid_files(tmp_path: Path, text: str, check) -> None:
    assert check(load_config(config_file=write(tmp_path, text)))


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("version: v2\n", "version"),
        ("flags: {migStrategy: sometimes}\n", "flags.migStrategy"),
        ("flags: {failOnInitError: 'yes'}\n", "flags.failOnInitError"),
        ("flags: {plugin: {deviceListStrategy: [envvar, floppy]}}\n", "flags.plugin.deviceListStrategy"),
        ("flags: {plugin: {deviceListStrategy: []}}\n", "flags.plugin.deviceListStrategy"),
        ("flags: {plugin: {deviceIDStrategy: serial}}\n", "flags.plugin.deviceIDStrategy"),
        ("flags: {plugin: {colour: blue}}\n", "flags.plugin.colour"),
        ("flags: {turbo: true}\n", "flags.turbo"),
        ("flags: [1, 2]\n", "flags"),
        ("extras: {}\n", "extras"),
        (
            "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 1}]}}\n",
            "sharing.timeSlicing.resources[0].replicas",
        ),
        ("sharing: {timeSlicing: {resources: []}}\n", "sharing.timeSlicing.resources"),
        (
            "sharing: {timeSlicing: {resources: [{name: x, replicas: 2, speed: 3}]}}\n",
            "sharing.timeSlicing.resources[0].speed",
        ),
        ("sharing: {spacesharing: {}}\n", "sharing.spacesharing"),
        ("resources: {gpus: [{pattern: '*'}]}\n", "resources.gpus[0].name"),
        ("imex: {channelIDs: [3]}\n", "imex.channelIDs"),
        ("gpuDevicePlugin: {logFormat: xml}\n", "gpuDevicePlugin.logFormat"),
        ("gpuDevicePlugin: {devicePluginDir: ''}\n", "gpuDevicePlugin.devicePluginDir"),
        ("gpuDevicePlugin: {devicePluginDir: ' '}\n", "gpuDevicePlugin.devicePluginDir"),
        ("flags: {nvidiaDriverRoot: ''}\n", "flags.nvidiaDriverRoot"),
        ("flags: {nvidiaDevRoot: run/nvidia/driver}\n", "flags.nvidiaDevRoot"),
        ("[1, 2]\n", "config file"),
        ("flags: {migStrategy: [\n", "config file"),
    ],
    ids=[
        "other-version",
        "bad-mig-strategy",
        "string-for-bool",
        "unknown-list-strategy",
        "empty-strategy-list",
        "bad-id-strategy",
        "unknown-plugin-key",
        "unknown-flag",
        "flags-not-mapping",
        "unknown-top-level",
        "one-replica",
        "no-shared-resources",
        "unknown-sharing-resource-key",
        "unknown-sharing-kind",
        "resource-without-name",
        "imex-channel",
        "bad-log-format",
        "empty-device-plugin-dir",
        "blank-device-plugin-dir",
        "empty-driver-root",
        "relative-dev-root",
        "not-a-mapping",
        "broken-yaml",
    ],
)
def test_invalid_files_name_the_field(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config_file=write(tmp_path, text))
    assert caught.value.field == field


def test_an_empty_device_plugin_dir_flag_is_refused_not_taken_as_the_working_dir() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(cli={"gpuDevicePlugin.devicePluginDir": ""})
    assert caught.value.field == "gpuDevicePlugin.devicePluginDir" and "empty" in caught.value.message


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(config_file=tmp_path / "absent.yaml")


FILE = "flags: {migStrategy: single, failOnInitError: true}\ngpuDevicePlugin: {devicePluginDir: /from-file}\n"


@pytest.mark.parametrize(
    ("env", "cli", "expected"),
    [
        ({}, {}, ("single", True, "/from-file")),
        ({"MIG_STRATEGY": "mixed", "DEVICE_PLUGIN_DIR": "/from-env"}, {}, ("mixed", True, "/from-env")),
        (
            {"MIG_STRATEGY": "mixed", "FAIL_ON_INIT_ERROR": "false"},
            {"flags.migStrategy": "none"},
            ("none", False, "/from-file"),
        ),
        (
            {"DEVICE_PLUGIN_DIR": "/from-env"},
            {"gpuDevicePlugin.devicePluginDir": "/from-cli"},
            (None, None, "/from-cli"),
        ),
        ({"MIG_STRATEGY": ""}, {"flags.migStrategy": None}, ("single", True, "/from-file")),
        ({"UNRELATED": "x"}, {}, ("single", True, "/from-file")),
    ],
    ids=[
        "file-only",
        "env-over-file",
        "cli-over-env-over-file",
        "cli-over-env-dir",
        "empty-and-unset-ignored",
        "other-env",
    ],
)
def test_precedence_cli_over_env_over_file(tmp_path: Path, env: dict, cli: dict, expected: tuple) -> None:
    config = load_config(config_file=write(tmp_path, FILE), env=env, cli=cli)
    mig, fail, directory = expected
    if mig is not None:
        assert config.flags.mig_strategy == mig
        assert config.flags.fail_on_init_error is fail
    assert str(config.daemon.device_plugin_dir) == directory


@pytest.mark.parametrize(
    ("env", "field", "needle"),
    [
        ({"FAIL_ON_INIT_ERROR": "perhaps"}, "flags.failOnInitError", "env FAIL_ON_INIT_ERROR"),
        ({"DEVICE_LIST_STRATEGY": "envvar,floppy"}, "flags.plugin.deviceListStrategy", "env DEVICE_LIST_STRATEGY"),
        ({"LOG_FORMAT": "xml"}, "gpuDevicePlugin.logFormat", "env LOG_FORMAT"),
    ],
    ids=["bool", "strategy-list", "log-format"],
)
def test_bad_env_values_name_field_and_variable(env: dict, field: str, needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(env=env)
    assert caught.value.field == field
    assert needle in str(caught.value)


def test_nvidia_env_names_map_to_their_fields() -> None:
    config = load_config(
        env={
            "PASS_DEVICE_SPECS": "true",
            "DEVICE_LIST_STRATEGY": "volume-mounts,cdi-cri",
            "DEVICE_ID_STRATEGY": "index",
            "NVIDIA_DRIVER_ROOT": "/run/nvidia/driver",
            "METRICS_ADDRESS": "127.0.0.1:9400",
        }
    )
    assert config.flags.plugin.pass_device_specs is True
    assert config.flags.plugin.device_list_strategy == ("volume-mounts", "cdi-cri")
    assert config.flags.plugin.device_id_strategy == "index"
    assert config.flags.nvidia_driver_root == "/run/nvidia/driver"
    assert config.daemon.metrics_address == "127.0.0.1:9400"


@pytest.mark.parametrize(
    ("cli", "env", "expected"),
    [
        ("/cli.yaml", {"CONFIG_FILE": "/env.yaml"}, "/cli.yaml"),
        (None, {"CONFIG_FILE": "/env.yaml"}, "/env.yaml"),
        (None, {}, None),
        (None, {"CONFIG_FILE": ""}, None),
    ],
    ids=["cli-wins", "env", "none", "empty-env-is-unset"],
)
def test_config_file_path_precedence(cli: str | None, env: dict, expected: str | None) -> None:
    found = config_file_path(cli, env)
    assert (str(found) if found else None) == expected


def test_effective_config_is_one_line_of_json(tmp_path: Path) -> None:
    config = load_config(config_file=write(tmp_path, NVIDIA_EXAMPLE), env={"LOG_FORMAT": "json"})
    line = config.describe()
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["flags"]["plugin"]["device_list_strategy"] == ["envvar"]
    assert parsed["daemon"]["log_format"] == "json"
    assert parsed["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 4


def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"version: v1\n\xff\xfe flags: {}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(config_file=path)
    assert caught.value.field == "config file" and "UTF-8" in caught.value.message
