"""No silent ignores: NVIDIA's fields accepted with no effect are named in ONE warning, at start (both
modes go through `run`), after every reload that takes a new config, and by the commands that show what
`run` would serve. The list is exact: fields at values that do nothing anyway are not named."""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from device_plugin.commands._compose import load_cli_config
from device_plugin.config.file_reload import ConfigFileReload
from device_plugin.config.loader import ConfigSources, load_config
from device_plugin.config.not_applied import DECLARED, DOC, not_applied

ROOT = Path(__file__).resolve().parents[2]
ALL = (
    "flags.gdrcopyEnabled",
    "flags.gdsEnabled",
    "flags.mofedEnabled",
    "flags.useNodeFeatureAPI",
    "flags.deviceDiscoveryStrategy",
    "flags.plugin.nvidiaCTKPath",
    "flags.plugin.containerDriverRoot",
    "flags.gfd",
)
EVERYTHING = """
flags:
  gdrcopyEnabled: true
  gdsEnabled: true
  mofedEnabled: true
  useNodeFeatureAPI: true
  deviceDiscoveryStrategy: tegra
  gfd: {oneshot: true}
  plugin: {nvidiaCTKPath: /opt/nvidia-ctk, containerDriverRoot: /host-driver}
resources:
  gpus: [{pattern: "A100*", name: a100}]
"""

CASES: list[tuple[str, str, dict[str, str], tuple[str, ...]]] = [
    ("nothing-set", "version: v1\n", {}, ()),
    ("nvidia-time-slicing", "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}", {}, ()),
    ("gds-on", "flags: {gdsEnabled: true}", {}, ("flags.gdsEnabled",)),
    ("gds-off-does-nothing-anyway", "flags: {gdsEnabled: false, gdrcopyEnabled: false, mofedEnabled: false}", {}, ()),
    ("gds-from-nvidias-env-var", "version: v1\n", {"GDS_ENABLED": "true"}, ("flags.gdsEnabled",)),
    ("mofed-from-nvidias-env-var", "version: v1\n", {"MOFED_ENABLED": "1"}, ("flags.mofedEnabled",)),
    (
        "container-root-from-nvidias-newer-env-name",
        "version: v1\n",
        {"DRIVER_ROOT_CTR_PATH": "/host-driver"},
        ("flags.plugin.containerDriverRoot",),
    ),
    (
        "node-feature-api-from-gfds-env",
        "version: v1\n",
        {"GFD_USE_NODE_FEATURE_API": "true"},
        ("flags.useNodeFeatureAPI",),
    ),
    ("discovery-nvml-is-what-we-do", "flags: {deviceDiscoveryStrategy: nvml}", {}, ()),
    ("discovery-tegra", "flags: {deviceDiscoveryStrategy: tegra}", {}, ("flags.deviceDiscoveryStrategy",)),
    ("node-feature-api-false-is-what-we-do", "flags: {useNodeFeatureAPI: false}", {}, ()),
    ("empty-resources-lists", "resources: {gpus: [], mig: []}", {}, ()),
    ("resources-are-applied", "resources: {mig: [{pattern: 1g.10gb, name: small}]}", {}, ()),
    ("ctk-path-default", "flags: {plugin: {nvidiaCTKPath: /usr/bin/nvidia-ctk}}", {}, ()),
    ("imex-is-not-this-warnings", "imex: {channelIDs: [0], required: false}", {}, ()),
    (
        "mode-dra-applies-neither-resources-nor-imex",
        "gpuDevicePlugin: {mode: dra}\nimex: {channelIDs: [0]}\nresources: {gpus: [{pattern: '*', name: x}]}",
        {},
        ("resources", "imex.channelIDs"),
    ),
    ("everything", EVERYTHING, {}, ALL),
]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "env", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_exactly_the_fields_without_effect_are_named(
    tmp_path: Path, text: str, env: dict[str, str], expected: tuple[str, ...]
) -> None:
    assert not_applied(load_config(config_file=write(tmp_path, text), env=env)) == expected


def test_every_declared_field_without_effect_has_a_row_in_the_migrating_doc() -> None:
    text = (ROOT / "docs" / "migrating.md").read_text()
    section = text.split("## Accepted but not applied", 1)[1].split("\n## ", 1)[0]
    assert {d.path for d in DECLARED} == set(ALL)
    for path in ALL:
        assert f"`{path}`" in section, path
    assert DOC.endswith("#accepted-but-not-applied")


def warnings_about_it(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if r.levelno == logging.WARNING and "not applied" in r.getMessage()]


def test_a_reload_that_takes_new_config_names_them_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, "version: v1\n")
    sources = ConfigSources(path)
    reload = ConfigFileReload(sources.load, path)
    running = sources.load()
    path.write_text(EVERYTHING)
    with caplog.at_level(logging.WARNING):
        assert reload.reloaded(running) is not running
    (line,) = warnings_about_it(caplog.records)
    assert line.endswith(f"{', '.join(ALL)}; see {DOC} for what NVIDIA's plugin does with each")


def test_the_commands_that_show_what_run_serves_name_them(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    args = argparse.Namespace(config=str(write(tmp_path, "flags: {gdsEnabled: true}")), mig_strategy=None)
    with caplog.at_level(logging.WARNING):
        load_cli_config(args)
    (line,) = warnings_about_it(caplog.records)
    assert "flags.gdsEnabled" in line


@pytest.mark.parametrize("mode", ["device-plugin", "dra"], ids=["device-plugin-mode", "dra-mode"])
def test_run_names_them_once_at_start_in_either_mode(tmp_path: Path, mode: str) -> None:
    config = write(tmp_path, yaml.safe_dump({"flags": {"gdsEnabled": True, "gfd": {"oneshot": True}}}))
    env = {k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "KUBECONFIG", "CONFIG_FILE", "PLUGIN_MODE")}
    # Stops right after the start-up lines: device-plugin mode on --fake-events without --machine, mode dra
    # on the missing NODE_NAME.
    argv = ["run", "--config", str(config), "--mode", mode, "--metrics-address", ""]
    argv += ["--fake-events", "/nonexistent"] if mode == "device-plugin" else []
    command = [sys.executable, "-m", "device_plugin.cli", *argv]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if "accepted but not applied" in line]
    assert len(lines) == 1, done.stderr
    assert re.search(r"WARNING .*: flags\.gdsEnabled, flags\.gfd; see docs/migrating\.md", lines[0]), lines[0]
