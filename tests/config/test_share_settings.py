"""gpuDevicePlugin.shares: the isolation a node's memory shares get, from the file, the environment and the
flag; `hard` is refused with the reason (this build cannot set it), other values with the choices."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_plugin.config.loader import load_config
from device_plugin.config.model import Config
from device_plugin.core.errors import ConfigError


def from_file(tmp_path: Path, body: str) -> Config:
    path = tmp_path / "config.yaml"
    path.write_text("version: v1\ngpuDevicePlugin:\n  memoryShares: true\n  shares:\n" + body)
    return load_config(config_file=path, env={})


@pytest.mark.parametrize(
    ("body", "isolation"),
    [("    isolation: none\n", "none"), ("    isolation: per-process\n", "per-process"), ("    {}\n", "none")],
    ids=["none", "per-process", "default-none"],
)
def test_the_isolation_levels_this_build_gives_are_accepted(tmp_path: Path, body: str, isolation: str) -> None:
    assert from_file(tmp_path, body).daemon.shares.isolation == isolation


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("    isolation: hard\n", "hard is not built: a per-container memory limit needs"),
        ("    isolation: mps\n", "must be one of none, per-process"),
        ("    cdiSpecDir: relative/cdi\n", "must be an absolute path"),
        ('    mpsControl: " "\n', "must name a program"),
    ],
    ids=["hard-refused-with-the-reason", "an-unknown-level", "a-relative-cdi-folder", "an-empty-program"],
)
def test_what_cannot_be_applied_is_refused_naming_the_field(tmp_path: Path, body: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as caught:
        from_file(tmp_path, body)
    assert "gpuDevicePlugin.shares." in str(caught.value)


def test_the_environment_sets_them_too() -> None:
    env = {"MEMORY_SHARE_ISOLATION": "per-process", "MPS_CONTROL": "/opt/mps", "CDI_SPEC_DIR": "/etc/cdi"}
    shares = load_config(config_file=None, env=env).daemon.shares
    assert (shares.isolation, shares.mps_control, shares.cdi_spec_dir) == ("per-process", "/opt/mps", "/etc/cdi")
    with pytest.raises(ConfigError, match="hard is not built"):
        load_config(config_file=None, env={"MEMORY_SHARE_ISOLATION": "hard"})
