"""One loader for start-up and reloads: a reload applies "CLI > env > file" exactly as start-up did, so a
flag or an env var given at start still wins over the edited file (in either mode: `run` hands the same
ConfigSources.load to the node runtime)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from device_plugin.commands.run import add_arguments
from device_plugin.config.file_reload import ConfigFileReload
from device_plugin.config.loader import load_config, sources_from_args

CASES = [
    # (flags at start, env at start, file edit, migStrategy after the reload, deviceIDStrategy after it)
    ([], {}, "flags: {migStrategy: mixed, plugin: {deviceIDStrategy: index}}", "mixed", "index"),
    (["--mig-strategy", "single"], {}, "flags: {migStrategy: mixed}", "single", "uuid"),
    ([], {"DEVICE_ID_STRATEGY": "index"}, "flags: {plugin: {deviceIDStrategy: uuid}}", "none", "index"),
    (
        ["--mig-strategy", "single"],
        {"MIG_STRATEGY": "mixed"},
        "flags: {migStrategy: none}",
        "single",
        "uuid",
    ),
]


@pytest.mark.parametrize(
    ("argv", "env", "edit", "mig", "ids"),
    CASES,
    ids=["file-alone-applies", "flag-wins-over-the-edit", "env-wins-over-the-edit", "flag-wins-over-env-and-edit"],
)
def test_a_reload_keeps_the_start_up_precedence(
    tmp_path: Path, argv: list[str], env: dict[str, str], edit: str, mig: str, ids: str
) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text("version: v1\n")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    sources = sources_from_args(parser.parse_args(["--config", str(config_file), *argv]), env)
    running = sources.load()
    reload = ConfigFileReload(sources.load, sources.config_file)
    config_file.write_text(edit)
    loaded = reload.reloaded(running)
    assert (loaded.flags.mig_strategy, loaded.flags.plugin.device_id_strategy) == (mig, ids)


def test_the_sources_are_read_again_not_remembered(tmp_path: Path) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text("flags: {migStrategy: single}\n")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    sources = sources_from_args(parser.parse_args(["--config", str(config_file)]), {})
    assert sources.load().flags.mig_strategy == "single"
    config_file.write_text("flags: {migStrategy: mixed}\n")
    assert sources.load().flags.mig_strategy == "mixed"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"NVIDIA_CDI_HOOK_PATH": "/opt/hook"}, "/opt/hook"),
        ({"NVIDIA_CTK_PATH": "/opt/ctk"}, "/opt/ctk"),
        ({"NVIDIA_CTK_PATH": "/opt/ctk", "NVIDIA_CDI_HOOK_PATH": "/opt/hook"}, "/opt/ctk"),
        ({"NVIDIA_CTK_PATH": "", "NVIDIA_CDI_HOOK_PATH": "/opt/hook"}, "/opt/hook"),
    ],
    ids=["nvidias-other-name", "our-name", "ours-first-when-both", "empty-counts-as-unset"],
)
def test_a_field_nvidia_reads_under_two_names_is_read_under_both(env: dict[str, str], expected: str) -> None:
    config = load_config(env=env)
    assert config.flags.plugin.nvidia_ctk_path == expected
    assert config.sources == (f"env {next(n for n in ('NVIDIA_CTK_PATH', 'NVIDIA_CDI_HOOK_PATH') if env.get(n))}",)
