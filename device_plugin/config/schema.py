"""The shape of the config file: which keys exist, what each one accepts, and where env and CLI map.

NVIDIA's `version: v1` keys are accepted as they are, so an existing ConfigMap works unchanged. Our
own settings live in a separate top-level section, `gpuDevicePlugin`, so they never collide with a
key NVIDIA might add to `flags`. Values are checked here; errors are ConfigError naming the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from device_plugin.errors import ConfigError
from device_plugin.short_text import short

SUPPORTED_VERSION = "v1"
# /metrics, /healthz, /readyz. 9100-9999 is crowded with exporters (9400 is dcgm-exporter's).
DEFAULT_METRICS_ADDRESS = ":2112"
OUR_SECTION = "gpuDevicePlugin"

DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class Field:
    """One leaf key: how a file value is checked and how an env/CLI string becomes a value."""

    check: Callable[[str, Any], Any]  # (field, file value) -> value
    from_text: Callable[[str, str], Any]  # (field, env/CLI text) -> value


def _bool(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(field, f"must be true or false, got {short(value)}")
    return value


def _bool_text(field: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(field, f"must be true or false, got {short(text)}")


def _str(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(field, f"must be a string, got {short(value)}")
    return value


def _text(field: str, text: str) -> str:
    return text


def _choice(*choices: str) -> Field:
    def check(field: str, value: Any) -> str:
        if value not in choices:
            raise ConfigError(field, f"must be one of {', '.join(choices)}; got {short(value)}")
        return str(value)

    return Field(check, check)


def _strategy_list(field: str, value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ConfigError(field, f"must be a strategy or a non-empty list of them, got {short(value)}")
    for item in items:
        if item not in DEVICE_LIST_STRATEGIES:
            raise ConfigError(field, f"unknown strategy {short(item)}; choose from {', '.join(DEVICE_LIST_STRATEGIES)}")
    if len(set(items)) != len(items):
        raise ConfigError(field, f"lists a strategy twice: {short(items)}")
    return tuple(items)


def _strategy_text(field: str, text: str) -> list[str]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    _strategy_list(field, items)
    return items  # file-shaped: the merged mapping is checked again as a whole


def _dns_subdomain(field: str, value: Any) -> str:
    # A DRA driver name is a DNS subdomain (it prefixes attribute names and names the kubelet socket dir).
    if not isinstance(value, str) or len(value) > 63 or not _DNS_SUBDOMAIN.match(value):
        raise ConfigError(
            field, f"must be a DNS subdomain of at most 63 characters (e.g. gpu.nvidia.com), got {short(value)}"
        )
    return value


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MODES = ("device-plugin", "dra")  # one node runs one: both would hand out the same GPU twice
DEFAULT_DRA_DRIVER_NAME = "gpu.nvidia.com"


def _mapping(field: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(field, f"must be a mapping, got {short(value)}")
    return value


def _no_text(field: str, text: str) -> Any:
    raise ConfigError(field, "cannot be set from the environment or the command line")


@dataclass(frozen=True)
class Seconds:
    """A duration with a documented range (README, "Configuration"); NaN, infinities and booleans refused.

    The ranges keep every loop and wait sane: a tiny interval would spin a core, a huge one would
    overflow a timer or stop a thread for good.
    """

    low_s: float
    high_s: float

    def check(self, field: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ConfigError(field, f"must be a finite number of seconds, got {short(value)}")
        if not self.low_s <= value <= self.high_s:
            raise ConfigError(field, f"must be between {self.low_s:g} and {self.high_s:g} seconds, got {short(value)}")
        return float(value)

    def from_text(self, field: str, text: str) -> float:
        try:
            number = float(text)
        except ValueError as error:
            raise ConfigError(field, f"must be a number of seconds, got {short(text)}") from error
        return self.check(field, number)

    def field(self) -> Field:
        return Field(self.check, self.from_text)


RESCAN_INTERVAL = Seconds(1.0, 86400.0)


BOOL = Field(_bool, _bool_text)
STR = Field(_str, _text)
RAW_MAPPING = Field(_mapping, _no_text)

# Every leaf key by dotted path. Sections (mappings of keys) are the prefixes that appear here.
FIELDS: dict[str, Field] = {
    "flags.migStrategy": _choice("none", "single", "mixed"),
    "flags.failOnInitError": BOOL,
    "flags.nvidiaDriverRoot": STR,
    "flags.nvidiaDevRoot": STR,
    "flags.mpsRoot": STR,
    "flags.gdrcopyEnabled": BOOL,
    "flags.gdsEnabled": BOOL,
    "flags.mofedEnabled": BOOL,
    "flags.useNodeFeatureAPI": BOOL,
    "flags.deviceDiscoveryStrategy": _choice("auto", "nvml", "tegra"),
    "flags.plugin.passDeviceSpecs": BOOL,
    "flags.plugin.deviceListStrategy": Field(_strategy_list, _strategy_text),
    "flags.plugin.deviceIDStrategy": _choice("uuid", "index"),
    "flags.plugin.cdiAnnotationPrefix": STR,
    "flags.plugin.nvidiaCTKPath": STR,
    "flags.plugin.containerDriverRoot": STR,
    "flags.plugin.sharedDevicesAllocationPolicy": _choice("distributed", "packed"),
    "flags.gfd": RAW_MAPPING,  # GFD's settings: accepted so shared ConfigMaps load; this plugin ignores them
    f"{OUR_SECTION}.devicePluginDir": STR,
    f"{OUR_SECTION}.metricsAddress": STR,
    f"{OUR_SECTION}.logFormat": _choice("text", "json"),
    f"{OUR_SECTION}.gpuGauges": BOOL,
    f"{OUR_SECTION}.labelsFile": STR,
    f"{OUR_SECTION}.rescanIntervalSeconds": RESCAN_INTERVAL.field(),
    f"{OUR_SECTION}.nicHints": BOOL,
    f"{OUR_SECTION}.health": RAW_MAPPING,  # parsed by device_plugin.health.config (with the DP_* env vars)
    f"{OUR_SECTION}.mode": _choice(*MODES),
    f"{OUR_SECTION}.driverName": Field(_dns_subdomain, _dns_subdomain),
}
# Top-level keys with a shape of their own (validated in config_sections).
TOP_LEVEL = ("version", "flags", "resources", "sharing", "imex", OUR_SECTION)

# Environment variables, NVIDIA's names where NVIDIA has one.
ENV_FIELDS: dict[str, str] = {
    "MIG_STRATEGY": "flags.migStrategy",
    "FAIL_ON_INIT_ERROR": "flags.failOnInitError",
    "NVIDIA_DRIVER_ROOT": "flags.nvidiaDriverRoot",
    "NVIDIA_DEV_ROOT": "flags.nvidiaDevRoot",
    "MPS_ROOT": "flags.mpsRoot",
    "PASS_DEVICE_SPECS": "flags.plugin.passDeviceSpecs",
    "DEVICE_LIST_STRATEGY": "flags.plugin.deviceListStrategy",
    "DEVICE_ID_STRATEGY": "flags.plugin.deviceIDStrategy",
    "CDI_ANNOTATION_PREFIX": "flags.plugin.cdiAnnotationPrefix",
    "NVIDIA_CTK_PATH": "flags.plugin.nvidiaCTKPath",
    "CONTAINER_DRIVER_ROOT": "flags.plugin.containerDriverRoot",
    "DEVICE_PLUGIN_DIR": f"{OUR_SECTION}.devicePluginDir",
    "METRICS_ADDRESS": f"{OUR_SECTION}.metricsAddress",
    "LOG_FORMAT": f"{OUR_SECTION}.logFormat",
    "GPU_GAUGES": f"{OUR_SECTION}.gpuGauges",
    "LABELS_FILE": f"{OUR_SECTION}.labelsFile",
    "RESCAN_INTERVAL_SECONDS": f"{OUR_SECTION}.rescanIntervalSeconds",
    "NIC_HINTS": f"{OUR_SECTION}.nicHints",
    "PLUGIN_MODE": f"{OUR_SECTION}.mode",
    "DRA_DRIVER_NAME": f"{OUR_SECTION}.driverName",
}
# Set but empty still means something for these: "turn it off".
EMPTY_MEANS_OFF_ENV = frozenset({"METRICS_ADDRESS", "LABELS_FILE"})
CONFIG_FILE_ENV = "CONFIG_FILE"


def sections() -> set[str]:
    """Dotted paths that are mappings of known keys ("" is the top level)."""
    found = {""}
    for path in FIELDS:
        parts = path.split(".")
        found.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return found
