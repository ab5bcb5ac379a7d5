"""Each config field is declared once; the env map, CLI flags, health keys and reload rules come from it.

The tables below pin what users rely on (names, flags, reload behaviour), so a declaration edited by
mistake fails here, naming the field.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

import pytest

from device_plugin.commands.run import add_arguments
from device_plugin.config.declare import Reload
from device_plugin.config.health import KNOWN_KEYS, HealthConfig
from device_plugin.config.loader import CLI_FIELDS, load_effective_config
from device_plugin.config.model import EMPTY_MEANS_OFF_ENV, ENV_FIELDS, FIELDS, SETTINGS, Config, DaemonSettings
from device_plugin.config.reload import keep_restart_only, serving_settings

P, D = "flags.plugin", "gpuDevicePlugin"
ENV = {
    "MIG_STRATEGY": "flags.migStrategy",
    "FAIL_ON_INIT_ERROR": "flags.failOnInitError",
    "NVIDIA_DRIVER_ROOT": "flags.nvidiaDriverRoot",
    "NVIDIA_DEV_ROOT": "flags.nvidiaDevRoot",
    "MPS_ROOT": "flags.mpsRoot",
    "GDRCOPY_ENABLED": "flags.gdrcopyEnabled",
    "GDS_ENABLED": "flags.gdsEnabled",
    "MOFED_ENABLED": "flags.mofedEnabled",
    "DEVICE_DISCOVERY_STRATEGY": "flags.deviceDiscoveryStrategy",
    "USE_NODE_FEATURE_API": "flags.useNodeFeatureAPI",
    "SHARED_DEVICES_ALLOCATION_POLICY": f"{P}.sharedDevicesAllocationPolicy",
    "PASS_DEVICE_SPECS": f"{P}.passDeviceSpecs",
    "DEVICE_LIST_STRATEGY": f"{P}.deviceListStrategy",
    "DEVICE_ID_STRATEGY": f"{P}.deviceIDStrategy",
    "CDI_ANNOTATION_PREFIX": f"{P}.cdiAnnotationPrefix",
    "NVIDIA_CTK_PATH": f"{P}.nvidiaCTKPath",
    "CONTAINER_DRIVER_ROOT": f"{P}.containerDriverRoot",
    "DEVICE_PLUGIN_DIR": f"{D}.devicePluginDir",
    "METRICS_ADDRESS": f"{D}.metricsAddress",
    "LOG_FORMAT": f"{D}.logFormat",
    "GPU_GAUGES": f"{D}.gpuGauges",
    "LABELS_FILE": f"{D}.labelsFile",
    "RESCAN_INTERVAL_SECONDS": f"{D}.rescanIntervalSeconds",
    "NIC_HINTS": f"{D}.nicHints",
    "PLUGIN_MODE": f"{D}.mode",
    "DRA_DRIVER_NAME": f"{D}.driverName",
    "IMEX_CHANNEL_IDS": "imex.channelIDs",
    "IMEX_REQUIRED": "imex.required",
    "OWN_DOMAIN": f"{D}.ownDomain",
    "SOCKET_NAMES": f"{D}.socketNames",
    "PLACEMENT_HINTS": f"{D}.placementHints",
    "MEMORY_SHARES": f"{D}.memoryShares",
    "MEMORY_SHARE_ISOLATION": f"{D}.shares.isolation",
    "MPS_CONTROL": f"{D}.shares.mpsControl",
    "CDI_SPEC_DIR": f"{D}.shares.cdiSpecDir",
}
CLI = {
    "--mig-strategy": "flags.migStrategy",
    "--fail-on-init-error": "flags.failOnInitError",
    "--nvidia-driver-root": "flags.nvidiaDriverRoot",
    "--pass-device-specs": f"{P}.passDeviceSpecs",
    "--device-list-strategy": f"{P}.deviceListStrategy",
    "--device-id-strategy": f"{P}.deviceIDStrategy",
    "--device-plugin-dir": f"{D}.devicePluginDir",
    "--metrics-address": f"{D}.metricsAddress",
    "--log-format": f"{D}.logFormat",
    "--labels-file": f"{D}.labelsFile",
    "--rescan-interval-s": f"{D}.rescanIntervalSeconds",
    "--mode": f"{D}.mode",
    "--dra-driver-name": f"{D}.driverName",
    "--imex-channel-ids": "imex.channelIDs",
    "--imex-required": "imex.required",
    "--own-domain": f"{D}.ownDomain",
    "--socket-names": f"{D}.socketNames",
    "--placement-hints": f"{D}.placementHints",
    "--memory-shares": f"{D}.memoryShares",
    "--memory-share-isolation": f"{D}.shares.isolation",
}
# What a hot reload does (README "Hot reload"); everything under `flags` and the sections re-serve.
RELOAD = {
    f"{D}.labelsFile": Reload.AT_ONCE,
    f"{D}.rescanIntervalSeconds": Reload.AT_ONCE,
    f"{D}.metricsAddress": Reload.RESTART,
    f"{D}.gpuGauges": Reload.RESTART,
    f"{D}.logFormat": Reload.RESTART,
    f"{D}.health": Reload.RESTART,
    f"{D}.devicePluginDir": Reload.RESTART,
    f"{D}.ownDomain": Reload.RESTART,
    f"{D}.socketNames": Reload.RESTART,
    f"{D}.placementHints": Reload.RESTART,
    f"{D}.memoryShares": Reload.RESTART,
    f"{D}.shares.isolation": Reload.RESTART,
    f"{D}.shares.mpsControl": Reload.RESTART,
    f"{D}.shares.cdiSpecDir": Reload.RESTART,
    f"{D}.nicHints": Reload.NEXT_RESERVE,
    f"{D}.mode": Reload.START_ONLY,
    f"{D}.driverName": Reload.START_ONLY,
    "sharing": Reload.RESERVE,
    "resources": Reload.RESERVE,
    "imex.channelIDs": Reload.RESERVE,
    "imex.required": Reload.RESERVE,
}


def test_env_map_is_the_documented_one() -> None:
    assert ENV_FIELDS == ENV
    assert {"METRICS_ADDRESS", "LABELS_FILE", "IMEX_CHANNEL_IDS"} == EMPTY_MEANS_OFF_ENV


def test_cli_flags_are_the_documented_ones() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = {a.option_strings[0]: a.dest for a in parser._actions if a.dest in CLI_FIELDS}
    assert {flag: CLI_FIELDS[dest] for flag, dest in flags.items()} == CLI


@pytest.mark.parametrize(
    ("argv", "path", "value"),
    [
        (["--fail-on-init-error"], ("flags", "fail_on_init_error"), True),
        (["--fail-on-init-error=false"], ("flags", "fail_on_init_error"), False),
        (
            ["--device-list-strategy", "cdi-cri,envvar"],
            ("flags", "plugin", "device_list_strategy"),
            ("cdi-cri", "envvar"),
        ),
        (["--rescan-interval-s", "5"], ("daemon", "rescan_interval_s"), 5.0),
        (["--device-plugin-dir", "/x"], ("daemon", "device_plugin_dir"), Path("/x")),
    ],
    ids=["bare-bool-flag-is-true", "bool-flag-with-value", "strategy-list", "seconds", "dir-becomes-path"],
)
def test_generated_flags_reach_the_config(
    argv: list[str], path: tuple[str, ...], value: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (*ENV, "CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config: object = load_effective_config(parser.parse_args(argv), os.environ)
    for attr in path:
        config = getattr(config, attr)
    assert config == value


def test_every_flags_key_and_section_re_serves_and_only_those_of_ours_listed_do_not() -> None:
    for declared in SETTINGS:
        expected = RELOAD.get(declared.path, Reload.RESERVE)
        assert declared.setting.reload is expected, declared.path
        nvidias = declared.path.startswith(("flags.", "imex.")) or declared.path in ("resources", "sharing")
        assert nvidias == (expected is Reload.RESERVE), declared.path
    declared_classes = {d.path: d.setting.reload for d in SETTINGS}
    assert {path: declared_classes[path] for path in RELOAD} == RELOAD


def test_defaults_come_from_the_declarations() -> None:
    defaults = {d.path: d.default for d in SETTINGS}
    assert defaults[f"{D}.metricsAddress"] == ":2112"
    assert defaults[f"{D}.devicePluginDir"] == Path("/var/lib/kubelet/device-plugins")
    assert defaults[f"{P}.deviceListStrategy"] == ("envvar",)
    assert defaults[f"{D}.health"] == HealthConfig()
    assert set(FIELDS) == set(defaults)


def test_health_keys_come_from_health_config_declarations() -> None:
    assert KNOWN_KEYS == (
        "enabled",
        "ignoredXids",
        "criticalXids",
        "quietPeriodSeconds",
        "probeIntervalSeconds",
        "eventWaitSeconds",
        "retryInitialSeconds",
        "retryMaxSeconds",
    )


def test_restart_only_fields_keep_their_running_values() -> None:
    running = Config()
    loaded = replace(
        running,
        daemon=replace(
            running.daemon,
            metrics_address=":9",
            device_plugin_dir=Path("/elsewhere"),
            labels_file="/tmp/labels",
            rescan_interval_s=5.0,
            health=HealthConfig(quiet_period_s=1.0),
        ),
    )
    kept = keep_restart_only(running, loaded)
    assert kept.changed == (f"{D}.devicePluginDir", f"{D}.metricsAddress", f"{D}.health")
    assert kept.config.daemon == replace(DaemonSettings(), labels_file="/tmp/labels", rescan_interval_s=5.0)


@pytest.mark.parametrize(
    ("change", "re_serves"),
    [
        (lambda c: replace(c, flags=replace(c.flags, mig_strategy="mixed")), True),
        (
            lambda c: replace(c, flags=replace(c.flags, plugin=replace(c.flags.plugin, device_id_strategy="index"))),
            True,
        ),
        (lambda c: replace(c, imex=replace(c.imex, required=True)), True),
        (lambda c: replace(c, daemon=replace(c.daemon, labels_file="/tmp/x")), False),
        (lambda c: replace(c, daemon=replace(c.daemon, nic_hints=True)), False),
        (lambda c: replace(c, daemon=replace(c.daemon, metrics_address="")), False),
    ],
    ids=["flag", "plugin-flag", "imex-section", "labels-file-at-once", "nic-hints-next-re-serve", "restart-only"],
)
def test_serving_settings_change_only_for_re_serving_fields(change, re_serves: bool) -> None:  # type: ignore[no-untyped-def]
    config = Config()
    assert (serving_settings(change(config)) != serving_settings(config)) is re_serves
