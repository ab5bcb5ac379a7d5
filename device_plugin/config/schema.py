"""What a config value may be: the checks (file value) and text parsers (env/CLI) a declaration
names.

NVIDIA's `version: v1` keys are accepted as they are, so an existing ConfigMap works unchanged. Our
own settings live in a separate top-level section, `gpuDevicePlugin`, so they never collide with a
key NVIDIA might add to `flags`. Which keys exist, and where env and CLI map, is declared once per
field on the config dataclasses (config/declare.py, config/model.py). Errors are ConfigError naming
the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from device_plugin.core.ascii_digits import is_ascii_text
from device_plugin.core.errors import ConfigError
from device_plugin.core.names import OWN_DOMAIN, foreign_owner
from device_plugin.core.short_text import short

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


def _host_dir(field: str, value: Any) -> str:
    # Device paths handed to the kubelet are built under it: empty or relative would make them
    # relative.
    text = _str(field, value)
    if not text.startswith("/"):
        raise ConfigError(field, f"must be an absolute path on the host, got {short(text)}")
    return text


def _path(field: str, value: Any) -> Path:
    # An empty path would silently mean the working directory (Path("") is ".").
    if not _str(field, value).strip():
        raise ConfigError(field, "must be a path, got an empty string")
    return Path(value)


def _choice(*choices: str) -> Field:
    def check(field: str, value: Any) -> str:
        if value not in choices:
            raise ConfigError(field, f"must be one of {', '.join(choices)}; got {short(value)}")
        return str(value)

    return Field(check, check)


def _strategy_list(field: str, value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ConfigError(
            field, f"must be a strategy or a non-empty list of them, got {short(value)}"
        )
    for item in items:
        if item not in DEVICE_LIST_STRATEGIES:
            raise ConfigError(
                field,
                f"unknown strategy {short(item)}; choose from {', '.join(DEVICE_LIST_STRATEGIES)}",
            )
    if len(set(items)) != len(items):
        raise ConfigError(field, f"lists a strategy twice: {short(items)}")
    return tuple(items)


def _strategy_text(field: str, text: str) -> list[str]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    _strategy_list(field, items)
    return items  # file-shaped: the merged mapping is checked again as a whole


def _dns_subdomain(field: str, value: Any) -> str:
    # A DRA driver name is a DNS subdomain (it prefixes attribute names and names the kubelet socket
    # dir).
    if not isinstance(value, str) or len(value) > 63 or not _DNS_SUBDOMAIN.match(value):
        raise ConfigError(
            field,
            "must be a DNS subdomain of at most 63 characters (e.g. gpu.example.com), got "
            f"{short(value)}",
        )
    return value


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
MODES = ("device-plugin", "dra")  # one node runs one: both would hand out the same GPU twice
# gpuDevicePlugin.socketNames: NVIDIA's one name per resource, or one per plugin pod (rolling
# updates)
FIXED_SOCKET_NAMES, PER_INSTANCE_SOCKET_NAMES = "fixed", "per-instance"
SOCKET_NAMINGS = (FIXED_SOCKET_NAMES, PER_INSTANCE_SOCKET_NAMES)
# DRA: which of our placement attributes the slices carry
PLACEMENT_HINTS = ("full", "sets", "none")
# ours, so our attributes never read as NVIDIA driver's
DEFAULT_DRA_DRIVER_NAME = f"gpu.{OWN_DOMAIN}"


def _own_domain(field: str, value: Any) -> str:
    # Our labels and attributes go under this domain; one that NVIDIA or Kubernetes owns would make
    # our names read as theirs (core/names.py), so those domains and their subdomains are refused.
    checked = _dns_subdomain(field, value)
    owner = foreign_owner(checked)
    if owner is not None:
        raise ConfigError(
            field, f"{checked!r} is under {owner}, whose names are not ours; use a domain you own"
        )
    return checked


def _mapping(field: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(field, f"must be a mapping, got {short(value)}")
    return value


def _no_text(field: str, text: str) -> Any:
    raise ConfigError(field, "cannot be set from the environment or the command line")


@dataclass(frozen=True)
class Seconds:
    """A duration with a documented range (README, "Configuration"); NaN, infinities and booleans
    refused.

    The ranges keep every loop and wait sane: a tiny interval would spin a core, a huge one would
    overflow a timer or stop a thread for good.
    """

    low_s: float
    high_s: float

    def check(self, field: str, value: Any) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ConfigError(field, f"must be a finite number of seconds, got {short(value)}")
        if not self.low_s <= value <= self.high_s:
            raise ConfigError(
                field,
                f"must be between {self.low_s:g} and {self.high_s:g} seconds, got {short(value)}",
            )
        return float(value)

    def from_text(self, field: str, text: str) -> float:
        try:
            if not is_ascii_text(text):
                raise ValueError(text)
            number = float(text)
        except ValueError as error:
            raise ConfigError(field, f"must be a number of seconds, got {short(text)}") from error
        return self.check(field, number)

    def field(self) -> Field:
        return Field(self.check, self.from_text)


RESCAN_INTERVAL = Seconds(1.0, 86400.0)


BOOL = Field(_bool, _bool_text)
STR = Field(_str, _text)
PATH = Field(_path, _text)
HOST_DIR = Field(_host_dir, _text)  # kept as text, like NVIDIA's
STRATEGY_LIST = Field(_strategy_list, _strategy_text)
DNS_SUBDOMAIN = Field(_dns_subdomain, _dns_subdomain)
OWN_DOMAIN_NAME = Field(_own_domain, _own_domain)
RAW_MAPPING = Field(_mapping, _no_text)  # a section another parser reads (config/health.py)
FROZEN_MAPPING = Field(
    lambda field, value: MappingProxyType(dict(_mapping(field, value))), _no_text
)
choice = _choice
no_text = _no_text  # a section's kind: set in the file only

# The config file's top-level keys (NVIDIA's, and our section).
TOP_LEVEL = ("version", "flags", "resources", "sharing", "imex", OUR_SECTION)
CONFIG_FILE_ENV = "CONFIG_FILE"


def sections(paths: Iterable[str]) -> set[str]:
    """Dotted paths that are mappings of known keys ("" is the top level), given the leaf paths."""
    found = {""}
    for path in paths:
        parts = path.split(".")
        found.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return found
