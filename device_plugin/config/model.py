"""The daemon's configuration: NVIDIA's `version: v1` file, env variables and CLI flags, as typed
values.

Each field is declared once, on its dataclass attribute (config/declare.py): file key, check,
default, env var, CLI flag and reload class. NVIDIA's `flags` are declared in config/flags.py, our
`gpuDevicePlugin` section here, its `health` keys in config/health.py. The schema table (FIELDS),
the env map (ENV_FIELDS) and the flags `run` adds (CLI_SETTINGS) are derived from the declarations.
parse_config checks the merged, file-shaped mapping in one pass; config/loader.py merges the sources
(CLI > env > file > default) into it. The outcome is a frozen dataclass tree.
NVIDIA's sections `resources` and `sharing` are declared like the others (file only, reload class
RESERVE), `imex` as a section of two settings (config/imex.py, with NVIDIA's env vars and flags).
`sharing` is parsed into typed values, and checked, once, by config/sharing.py; only its checks that
need the GPUs (indices and UUIDs in `devices`) wait for build time (timeslice/config.py).
`resources` keeps its validated raw shape (config/sections.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from device_plugin.config.declare import (
    SECTION,
    SETTING,
    CliFlag,
    Reload,
    declared,
    section,
    setting,
)
from device_plugin.config.flags import Flags
from device_plugin.config.health import ENV_VARS as HEALTH_ENV_VARS
from device_plugin.config.health import HealthConfig, parse_health_config
from device_plugin.config.hints import helm_values_message, kubernetes_object_message
from device_plugin.config.imex import ImexConfig
from device_plugin.config.merge import walk
from device_plugin.config.reading import FIELD as FILE_FIELD
from device_plugin.config.schema import (
    BOOL,
    DEFAULT_DRA_DRIVER_NAME,
    DEFAULT_METRICS_ADDRESS,
    DNS_SUBDOMAIN,
    FIXED_SOCKET_NAMES,
    MODES,
    OUR_SECTION,
    OWN_DOMAIN_NAME,
    PATH,
    PLACEMENT_HINTS,
    RAW_MAPPING,
    RESCAN_INTERVAL,
    SOCKET_NAMINGS,
    STR,
    SUPPORTED_VERSION,
    TOP_LEVEL,
    Field,
    choice,
)
from device_plugin.config.sections import RESOURCES
from device_plugin.config.share_settings import ShareSettings
from device_plugin.config.sharing import parse_sharing_section, sharing_as_file
from device_plugin.config.sharing_model import SharingConfig
from device_plugin.core.errors import ConfigError
from device_plugin.core.names import OWN_DOMAIN
from device_plugin.core.short_text import short

DEFAULT_DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
DESCRIBE_LIMIT = 8192  # characters of the effective-config log line
RESERVE = Reload.RESERVE  # every key of NVIDIA's part re-serves


def _frozen(value: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


# Environment variables take NVIDIA's names where NVIDIA has one (Flags: config/flags.py). Flags'
# help texts are printed as is.
@dataclass(frozen=True)
class DaemonSettings:
    """Our own settings (section `gpuDevicePlugin`), not part of NVIDIA's format.

    The RESTART settings are declared in the order the reload warning names them."""

    device_plugin_dir: Path = setting(
        "devicePluginDir",
        PATH,
        default=DEFAULT_DEVICE_PLUGIN_DIR,
        reload=Reload.RESTART,
        env="DEVICE_PLUGIN_DIR",
        cli=CliFlag(
            "--device-plugin-dir",
            "the kubelet's device-plugin directory (the kubelet dir is its parent)",
            "DIR",
        ),
    )
    # host:port for /metrics, /healthz, /readyz; empty: off
    metrics_address: str = setting(
        "metricsAddress",
        STR,
        default=DEFAULT_METRICS_ADDRESS,
        reload=Reload.RESTART,
        env="METRICS_ADDRESS",
        empty_means_off=True,
        cli=CliFlag(
            "--metrics-address",
            'serve /metrics, /healthz, /readyz here; "" turns it off',
            "HOST:PORT",
        ),
    )
    # GPU memory/utilisation/temperature/power gauges; off where DCGM exporter runs
    gpu_gauges: bool = setting(
        "gpuGauges", BOOL, default=True, reload=Reload.RESTART, env="GPU_GAUGES"
    )
    log_format: str = setting(
        "logFormat",
        choice("text", "json"),
        default="text",
        reload=Reload.RESTART,
        env="LOG_FORMAT",
        cli=CliFlag(
            "--log-format",
            "how log lines are written: text or json (one object a line)",
            "text|json",
        ),
    )
    # node-feature-discovery features.d file to keep up to date; empty: off
    labels_file: str = setting(
        "labelsFile",
        STR,
        default="",
        reload=Reload.AT_ONCE,
        env="LABELS_FILE",
        empty_means_off=True,
        cli=CliFlag(
            "--labels-file", "node-feature-discovery features.d file to keep current", "FILE"
        ),
    )
    # how often MIG layouts and the GPU list are re-read
    rescan_interval_s: float = setting(
        "rescanIntervalSeconds",
        RESCAN_INTERVAL.field(),
        default=60.0,
        reload=Reload.AT_ONCE,
        env="RESCAN_INTERVAL_SECONDS",
        cli=CliFlag(
            "--rescan-interval-s", "re-read the GPUs and MIG layouts every N seconds", "SECONDS"
        ),
    )
    # Allocate sets GPU_DEVICE_PLUGIN_NICS (the allocated GPUs' close RDMA NICs)
    nic_hints: bool = setting(
        "nicHints", BOOL, default=False, reload=Reload.NEXT_RESERVE, env="NIC_HINTS"
    )
    # parsed by device_plugin.config.health, with the DP_* env vars
    health: HealthConfig = setting(
        "health",
        RAW_MAPPING,
        default_factory=HealthConfig,
        reload=Reload.RESTART,
        section_env=HEALTH_ENV_VARS,
    )
    mode: str = setting(
        "mode",
        choice(*MODES),
        default="device-plugin",
        reload=Reload.START_ONLY,
        env="PLUGIN_MODE",
        cli=CliFlag(
            "--mode",
            "device-plugin|dra; dra needs NODE_NAME (downward API) and an API server ($KUBECONFIG "
            "or the pod's "
            "service account)",
            "device-plugin|dra",
        ),
    )
    # the DRA driver name (mode dra only)
    driver_name: str = setting(
        "driverName",
        DNS_SUBDOMAIN,
        default=DEFAULT_DRA_DRIVER_NAME,
        reload=Reload.START_ONLY,
        env="DRA_DRIVER_NAME",
        cli=CliFlag("--dra-driver-name", "the DRA driver name (mode dra)", "NAME"),
    )
    # the domain of our own node labels and DRA attributes (never nvidia.com, kubernetes.io, k8s.io)
    own_domain: str = setting(
        "ownDomain",
        OWN_DOMAIN_NAME,
        default=OWN_DOMAIN,
        reload=Reload.RESTART,
        env="OWN_DOMAIN",
        cli=CliFlag("--own-domain", "domain of our own labels and DRA attributes", "DOMAIN"),
    )
    # per-instance: a socket name per pod (POD_UID), for maxSurge 1 on kubelets that track plugins
    # by socket
    socket_names: str = setting(
        "socketNames",
        choice(*SOCKET_NAMINGS),
        default=FIXED_SOCKET_NAMES,
        reload=Reload.RESTART,
        env="SOCKET_NAMES",
        cli=CliFlag(
            "--socket-names",
            "how our sockets are named: fixed (nvidia-<name>.sock) or per-instance "
            "(nvidia-<name>-<POD_UID>.sock, "
            "for rolling updates with maxSurge 1 on kubelets with PR 135437, see docs/upgrade.md)",
            "fixed|per-instance",
        ),
    )
    memory_shares: bool = setting(
        "memoryShares",
        BOOL,
        default=False,
        reload=Reload.RESTART,
        env="MEMORY_SHARES",
        cli=CliFlag(
            "--memory-shares",
            "DRA: whole GPUs shareable by memory (docs/sharing-dra.md)",
            "true|false",
        ),
    )
    # their isolation (config/share_settings.py)
    shares: ShareSettings = section("shares", ShareSettings)
    # DRA: the placement attributes of ours the slices carry; fewer cost the scheduler less
    # (docs/dra.md)
    placement_hints: str = setting(
        "placementHints",
        choice(*PLACEMENT_HINTS),
        default="full",
        reload=Reload.RESTART,
        env="PLACEMENT_HINTS",
        cli=CliFlag(
            "--placement-hints",
            "DRA: the placement attributes the slices carry (docs/dra.md)",
            "full|sets|none",
        ),
    )


@dataclass(frozen=True)
class Config:
    version: str = SUPPORTED_VERSION
    flags: Flags = section("flags", Flags)
    # NVIDIA's other top-level sections: set in the file only; a change re-serves every resource.
    # `resources`: per-model resource names, checked at load (config/resource_names.py), applied at
    # composition (allocation/resource_naming.py)
    resources: Mapping[str, Any] = setting(
        "resources", RESOURCES, reload=RESERVE, default_factory=_frozen
    )
    # parsed by config/sharing.py, with flags.plugin.sharedDevicesAllocationPolicy as the default
    # placement
    sharing: SharingConfig = setting(
        "sharing", RAW_MAPPING, reload=RESERVE, default_factory=SharingConfig
    )
    imex: ImexConfig = section("imex", ImexConfig)
    daemon: DaemonSettings = section(OUR_SECTION, DaemonSettings)
    sources: tuple[str, ...] = ()  # where values came from, for the start-up log line

    def describe(self, limit: int = DESCRIBE_LIMIT) -> str:
        """The effective config as one line of JSON, cut at `limit` characters (raw sections can be
        large)."""
        plain = _plain(self)
        # in the file's own keys, as an operator wrote it
        plain["sharing"] = sharing_as_file(self.sharing)
        text = json.dumps(plain, sort_keys=True, separators=(",", ":"))
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


# ---- derived from the declarations -----------------------------------------------------------

SETTINGS = declared(Config)  # every declared field, in declaration order
HEALTH_PATH = f"{OUR_SECTION}.health"  # a leaf here: config/health.py parses inside it
SHARING_PATH = "sharing"  # a leaf here: config/sharing.py parses (and checks) inside it, once
PARSED_SECTIONS = (HEALTH_PATH, SHARING_PATH)
ALLOCATION_POLICY_PATH = "flags.plugin.sharedDevicesAllocationPolicy"
# Every leaf key by dotted path. Sections (mappings of keys) are the prefixes that appear here.
FIELDS: dict[str, Field] = {d.path: d.setting.kind for d in SETTINGS}
ENV_FIELDS: dict[str, str] = {d.setting.env: d.path for d in SETTINGS if d.setting.env}
# Every name a field is read from, in the order they are tried: ours (NVIDIA's main name), then its
# aliases.
ENV_NAMES: dict[str, tuple[str, ...]] = {
    d.path: (d.setting.env, *d.setting.env_aliases) for d in SETTINGS if d.setting.env
}
# Set but empty still means something for these: "turn it off".
EMPTY_MEANS_OFF_ENV = frozenset(
    d.setting.env for d in SETTINGS if d.setting.env and d.setting.empty_means_off
)
# config/arguments.py adds these flags
CLI_SETTINGS = tuple(d for d in SETTINGS if d.setting.cli is not None)
_DEFAULTS = {d.path: d.default for d in SETTINGS}


# ---- parsing -------------------------------------------------------------------------------------


def parse_config(
    raw: Mapping[str, Any], *, sources: tuple[str, ...] = (), env: Mapping[str, str] | None = None
) -> Config:
    version = raw.get("version") or SUPPORTED_VERSION
    if version != SUPPORTED_VERSION:
        raise ConfigError(
            "version",
            f"unsupported version {short(version)}; only {SUPPORTED_VERSION!r} is accepted",
        )
    not_a_config = kubernetes_object_message(raw) or helm_values_message(raw, TOP_LEVEL)
    if not_a_config is not None:
        raise ConfigError(FILE_FIELD, not_a_config)
    values = walk(FIELDS, raw)
    config: Config = _build(Config, "", values, env or {})
    return replace(config, version=version, sources=sources)


def _parsed(path: str, values: Mapping[str, Any], env: Mapping[str, str]) -> Any:
    """The sections a parser of their own reads, from their checked mapping (None: not set)."""
    if path == HEALTH_PATH:
        return parse_health_config(values.get(path), env, field=path)
    placement = values.get(ALLOCATION_POLICY_PATH, _DEFAULTS[ALLOCATION_POLICY_PATH])
    return parse_sharing_section(values.get(path), default_placement=placement)


def _build(cls: type, prefix: str, values: Mapping[str, Any], env: Mapping[str, str]) -> Any:
    """The section's dataclass from the checked leaf values; unset keys keep their declared
    defaults."""
    kw: dict[str, Any] = {}
    for f in fields(cls):
        if SECTION in f.metadata:
            where = _join(prefix, f.metadata[SECTION])
            kw[f.name] = _build(f.default_factory, where, values, env)  # type: ignore[arg-type]
        elif SETTING in f.metadata:
            path = _join(prefix, f.metadata[SETTING].key)
            if path in PARSED_SECTIONS:
                kw[f.name] = _parsed(path, values, env)
            elif path in values:
                kw[f.name] = values[path]
    return cls(**kw)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
