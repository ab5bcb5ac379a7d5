"""The daemon's configuration: NVIDIA's `version: v1` file, env variables and CLI flags, merged once.

Precedence: CLI > env > file > default. Env and CLI values are turned into file-shaped values first
(errors name the variable or flag and the field), merged into the file's mapping, and the result is
checked in one pass (config_schema), so every source obeys the same rules. The outcome is a frozen
dataclass tree. `sharing`, `resources` and `imex` keep their validated raw shape for now: the
time-slicing parser in timeslice/ turns `sharing` into replicas.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from device_plugin.config.reading import load_config_file
from device_plugin.config.safe_write import check_write_target
from device_plugin.config.schema import (
    CONFIG_FILE_ENV,
    DEFAULT_DRA_DRIVER_NAME,
    DEFAULT_METRICS_ADDRESS,
    EMPTY_MEANS_OFF_ENV,
    ENV_FIELDS,
    FIELDS,
    OUR_SECTION,
    SUPPORTED_VERSION,
    TOP_LEVEL,
    sections,
)
from device_plugin.config.sections import check_imex, check_resources, check_sharing
from device_plugin.errors import ConfigError
from device_plugin.health.config import HealthConfig, parse_health_config
from device_plugin.short_text import short

DEFAULT_DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
DESCRIBE_LIMIT = 8192  # characters of the effective-config log line


def _frozen(value: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True)
class PluginFlags:
    pass_device_specs: bool = False
    device_list_strategy: tuple[str, ...] = ("envvar",)
    device_id_strategy: str = "uuid"
    cdi_annotation_prefix: str = "cdi.k8s.io/"
    nvidia_ctk_path: str = "/usr/bin/nvidia-ctk"
    container_driver_root: str = "/driver-root"
    shared_devices_allocation_policy: str = "distributed"


@dataclass(frozen=True)
class Flags:
    mig_strategy: str = "none"
    fail_on_init_error: bool = True
    nvidia_driver_root: str = "/"
    nvidia_dev_root: str | None = None  # None: same as nvidia_driver_root
    mps_root: str = ""
    gdrcopy_enabled: bool = False
    gds_enabled: bool = False
    mofed_enabled: bool = False
    use_node_feature_api: bool | None = None
    device_discovery_strategy: str = "auto"
    plugin: PluginFlags = field(default_factory=PluginFlags)
    gfd: Mapping[str, Any] = field(default_factory=_frozen)


@dataclass(frozen=True)
class DaemonSettings:
    """Our own settings (section `gpuDevicePlugin`), not part of NVIDIA's format."""

    device_plugin_dir: Path = DEFAULT_DEVICE_PLUGIN_DIR
    metrics_address: str = DEFAULT_METRICS_ADDRESS  # host:port for /metrics, /healthz, /readyz; empty: off
    log_format: str = "text"  # text | json
    gpu_gauges: bool = True  # GPU memory/utilisation/temperature/power gauges; off where DCGM exporter runs
    labels_file: str = ""  # node-feature-discovery features.d file to keep up to date; empty: off
    rescan_interval_s: float = 60.0  # how often MIG layouts and the GPU list are re-read
    nic_hints: bool = False  # Allocate sets GPU_DEVICE_PLUGIN_NICS (the allocated GPUs' close RDMA NICs)
    health: HealthConfig = field(default_factory=HealthConfig)
    mode: str = "device-plugin"  # device-plugin | dra
    driver_name: str = DEFAULT_DRA_DRIVER_NAME  # the DRA driver name (mode dra only)


@dataclass(frozen=True)
class Config:
    version: str = SUPPORTED_VERSION
    flags: Flags = field(default_factory=Flags)
    resources: Mapping[str, Any] = field(default_factory=_frozen)
    sharing: Mapping[str, Any] = field(default_factory=_frozen)
    imex: Mapping[str, Any] = field(default_factory=_frozen)
    daemon: DaemonSettings = field(default_factory=DaemonSettings)
    sources: tuple[str, ...] = ()  # where values came from, for the start-up log line

    def describe(self, limit: int = DESCRIBE_LIMIT) -> str:
        """The effective config as one line of JSON, cut at `limit` characters (raw sections can be large)."""
        text = json.dumps(_plain(self), sort_keys=True, separators=(",", ":"))
        if len(text) <= limit:
            return text
        return f"{text[:limit]}… (cut: {len(text)} characters in all)"


def _plain(value: Any) -> Any:
    """JSON-ready copy (asdict cannot copy the read-only mappings)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(_plain(v) for v in value)
    if isinstance(value, Path):
        return str(value)
    return value


# ---- loading -----------------------------------------------------------------------------------


def read_config_file(path: Path) -> dict[str, Any]:
    """The file's top-level mapping, read within the limits of device_plugin.config_file."""
    return load_config_file(path)


def config_file_path(cli_path: str | None, env: Mapping[str, str]) -> Path | None:
    if cli_path:
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
    raw = read_config_file(config_file) if config_file is not None else {}
    sources = [f"file {config_file}"] if config_file is not None else []
    env_set = [
        (name, text)
        for name, text in sorted((env or {}).items())
        if name in ENV_FIELDS and (text != "" or name in EMPTY_MEANS_OFF_ENV)
    ]
    for name, text in env_set:
        path = ENV_FIELDS[name]
        _put(raw, path, _from_text(path, text, origin=f"env {name}"))
    if env_set:
        sources.append("env " + ",".join(name for name, _ in env_set))
    cli_set = [(path, text) for path, text in sorted((cli or {}).items()) if text is not None]
    for path, text in cli_set:
        _put(raw, path, _from_text(path, text, origin="command line"))
    if cli_set:
        sources.append("cli " + ",".join(path for path, _ in cli_set))
    config = parse_config(raw, sources=tuple(sources), env=env)
    check_labels_file(config.daemon.labels_file, config.daemon.device_plugin_dir)
    return config


def check_labels_file(labels_file: str, device_plugin_dir: Path) -> None:
    """Refuse a labels file inside the device-plugin directory or onto a non-regular file (ConfigError).

    A reload passes the *running* directory: a new devicePluginDir only applies after a restart."""
    if labels_file:
        check_write_target(Path(labels_file), refuse_under=(device_plugin_dir,), field=f"{OUR_SECTION}.labelsFile")


def _from_text(path: str, text: str, *, origin: str) -> Any:
    if path not in FIELDS:
        raise ConfigError(path, f"unknown field (from {origin})")
    try:
        return FIELDS[path].from_text(path, text)
    except ConfigError as error:
        raise ConfigError(path, f"{error.message} (from {origin})") from error


def _put(raw: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node = raw
    for i, part in enumerate(parents):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(".".join(parents[: i + 1]), f"must be a mapping, got {short(child)}")
        node = child
    node[leaf] = value


def parse_config(
    raw: Mapping[str, Any], *, sources: tuple[str, ...] = (), env: Mapping[str, str] | None = None
) -> Config:
    version = raw.get("version") or SUPPORTED_VERSION
    if version != SUPPORTED_VERSION:
        raise ConfigError("version", f"unsupported version {short(version)}; only {SUPPORTED_VERSION!r} is accepted")
    values = _walk(raw)
    plugin = PluginFlags(
        **_pick(
            values,
            "flags.plugin.",
            PluginFlags,
            rename={"deviceIDStrategy": "device_id_strategy", "nvidiaCTKPath": "nvidia_ctk_path"},
        )
    )
    flags_kw = _pick(values, "flags.", Flags, rename={"useNodeFeatureAPI": "use_node_feature_api"})
    flags_kw["gfd"] = _frozen(flags_kw.get("gfd"))
    daemon_kw = _pick(values, f"{OUR_SECTION}.", DaemonSettings, rename={"rescanIntervalSeconds": "rescan_interval_s"})
    if "device_plugin_dir" in daemon_kw:
        daemon_kw["device_plugin_dir"] = Path(daemon_kw["device_plugin_dir"])
    daemon_kw["health"] = parse_health_config(daemon_kw.get("health"), env or {}, field=f"{OUR_SECTION}.health")
    return Config(
        version=version,
        flags=Flags(plugin=plugin, **flags_kw),
        resources=_frozen(check_resources(raw.get("resources"))),
        sharing=_frozen(check_sharing(raw.get("sharing"))),
        imex=_frozen(check_imex(raw.get("imex"))),
        daemon=DaemonSettings(**daemon_kw),
        sources=sources,
    )


def _walk(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check every key of the known sections; return the set leaf values by dotted path."""
    known_sections = sections()
    values: dict[str, Any] = {}

    def visit(prefix: str, node: Mapping[str, Any]) -> None:
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if prefix == "" and key in TOP_LEVEL and path not in known_sections:
                continue  # version / resources / sharing / imex: checked on their own
            if path in FIELDS:
                if value is not None:  # null means "not set", as with NVIDIA's pointer fields
                    values[path] = FIELDS[path].check(path, value)
            elif path in known_sections:
                if value is None:
                    continue
                if not isinstance(value, dict):
                    raise ConfigError(path, f"must be a mapping, got {short(value)}")
                visit(path, value)
            else:
                raise ConfigError(path, "unknown field")

    visit("", raw)
    return values


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _pick(values: Mapping[str, Any], prefix: str, target: type, *, rename: Mapping[str, str] | None = None) -> dict:
    names = set(target.__dataclass_fields__)  # type: ignore[attr-defined]
    picked: dict[str, Any] = {}
    for path, value in values.items():
        if not path.startswith(prefix) or "." in path[len(prefix) :]:
            continue
        key = path[len(prefix) :]
        attr = (rename or {}).get(key) or _snake(key)
        if attr not in names:
            raise AssertionError(f"config field {path} has no attribute {attr} in {target.__name__}")
        picked[attr] = value
    return picked
