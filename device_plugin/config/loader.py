"""The one config loader: file, environment and command line merged as "CLI > env > file > default".

Used at start-up (`run`, and the commands that show what `run` would serve) and by every hot reload
in both modes (the node runtime calls back into the same ConfigSources.load). Env and CLI values are
turned into file-shaped values first (errors name the variable or flag and the field), merged into
the file's mapping, and the result is checked in one pass by config/model.py parse_config, so every
source obeys the same rules. The labels file is checked here, once per load, against the kubelet
directories of the loaded devicePluginDir (a reload checks it against the running directory instead
when the edit moved it).

Boundary: which sources, in which order; what a key means is model.py's, reading the file
reading.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from device_plugin.config.merge import from_text, put
from device_plugin.config.model import (
    CLI_SETTINGS,
    EMPTY_MEANS_OFF_ENV,
    ENV_NAMES,
    FIELDS,
    Config,
    parse_config,
)
from device_plugin.config.reading import load_config_file
from device_plugin.config.safe_write import check_write_target, kubelet_owned_dirs
from device_plugin.config.schema import CONFIG_FILE_ENV, OUR_SECTION
from device_plugin.core.errors import ConfigError

LABELS_FILE_FIELD = f"{OUR_SECTION}.labelsFile"
CONFIG_FLAG = "--config"
# argparse dest of each declared flag -> its dotted field path
CLI_FIELDS: dict[str, str] = {
    d.setting.cli.dest: d.path for d in CLI_SETTINGS if d.setting.cli is not None
}


@dataclass(frozen=True)
class ConfigSources:
    """Where the config comes from: read again, the same way, at every load (start-up and
    reloads)."""

    config_file: Path | None = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # field path -> text
    cli: Mapping[str, str | None] = field(default_factory=lambda: MappingProxyType({}))

    def load(self) -> Config:
        return load_config(config_file=self.config_file, env=self.env, cli=self.cli)


def sources_from_args(args: Any, env: Mapping[str, str]) -> ConfigSources:
    """The sources a command line names: `--config` (else CONFIG_FILE) and every declared flag it
    has."""
    cli = {path: getattr(args, dest, None) for dest, path in CLI_FIELDS.items()}
    return ConfigSources(
        config_file_path(getattr(args, "config", None), env),
        MappingProxyType(dict(env)),
        MappingProxyType(cli),
    )


def load_effective_config(args: Any, env: Mapping[str, str]) -> Config:
    """The config `run` would serve with these parsed arguments and this environment."""
    return sources_from_args(args, env).load()


def config_file_path(cli_path: str | None, env: Mapping[str, str]) -> Path | None:
    """`--config`, else CONFIG_FILE (set but empty counts as unset, as NVIDIA's does); `--config ""`
    is refused."""
    if cli_path is not None:
        if not cli_path.strip():
            raise ConfigError(CONFIG_FLAG, "is empty; name a config file, or leave the flag out")
        return Path(cli_path)
    from_env = env.get(CONFIG_FILE_ENV, "")
    return Path(from_env) if from_env else None


def load_config(
    *,
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    cli: Mapping[str, str | None] | None = None,
) -> Config:
    """Merge file, env and CLI (keys of `cli` are dotted field paths, values their text)."""
    raw = load_config_file(config_file) if config_file is not None else {}
    sources = [f"file {config_file}"] if config_file is not None else []
    env_set = sorted(_from_env(env or {}))
    for name, path, text in env_set:
        put(raw, path, from_text(FIELDS, path, text, origin=f"env {name}"))
    if env_set:
        sources.append("env " + ",".join(name for name, _, _ in env_set))
    cli_set = [(path, text) for path, text in sorted((cli or {}).items()) if text is not None]
    for path, text in cli_set:
        put(raw, path, from_text(FIELDS, path, text, origin="command line"))
    if cli_set:
        sources.append("cli " + ",".join(path for path, _ in cli_set))
    config = parse_config(raw, sources=tuple(sources), env=env)
    check_labels_file(config.daemon.labels_file, config.daemon.device_plugin_dir)
    return config


def _from_env(env: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(variable, field path, text) for each field set in `env`: the first of its names that is set.
    Set but empty counts as unset, except where empty means "off" (METRICS_ADDRESS, LABELS_FILE)."""
    found = []
    for path, names in ENV_NAMES.items():
        for name in names:
            text = env.get(name)
            if text is not None and (text != "" or names[0] in EMPTY_MEANS_OFF_ENV):
                found.append((name, path, text))
                break
    return found


def check_labels_file(labels_file: str, device_plugin_dir: Path) -> None:
    """Refuse a labels file in a directory the kubelet and we serve in, or onto a non-regular file.

    The directories are devicePluginDir and, beside it, the kubelet's plugins/ (DRA sockets, our DRA
    checkpoint) and plugins_registry/ (registration sockets): ConfigError naming labelsFile."""
    if labels_file:
        check_write_target(
            Path(labels_file),
            refuse_under=kubelet_owned_dirs(device_plugin_dir),
            field=LABELS_FILE_FIELD,
        )
