"""HealthConfig: which faults count, how fast the watcher probes, how long a GPU must stay quiet to
recover.

Boundary: parsing and validating the `health` config section and the NVIDIA-compatible env vars into
one frozen value; no NVML, no threads. The config loader (device_plugin/config/model.py) hands the
raw mapping of the section to parse_health_config; the daemon (device_plugin/node/health_routing.py)
hands the result to the HealthWatcher.

Env vars (read from the injected env mapping, as NVIDIA's plugin reads them; they add to the file):
- DP_DISABLE_HEALTHCHECKS: `all` turns every check off (devices stay Healthy, as with NVIDIA);
  `xids` ignores every Xid (ECC, lost-GPU and probe checks stay on); otherwise a comma list of extra
  Xids to ignore. Tokens combine: `xids,all` is `all`.
- DP_ENABLE_HEALTHCHECKS: a comma list of Xids that are critical even if ignored, or `all` (every
  Xid).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from device_plugin.config.declare import SETTING, Reload, setting
from device_plugin.config.hints import did_you_mean
from device_plugin.config.schema import BOOL, Field, Seconds
from device_plugin.core.ascii_digits import is_ascii_digits
from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import short

DISABLE_ENV = "DP_DISABLE_HEALTHCHECKS"
ENABLE_ENV = "DP_ENABLE_HEALTHCHECKS"
ENV_VARS = (DISABLE_ENV, ENABLE_ENV)
# Application-level Xids (a bad kernel, a page fault, a killed context, ...): the GPU itself is
# fine.
DEFAULT_IGNORED_XIDS = frozenset({13, 31, 43, 45, 68, 109})


MAX_XID = 65535  # Xids in use today are below 200; a larger number is a typo
RESTART = Reload.RESTART
# ignoredXids / criticalXids: a list of Xids or "all" (checked by _xid_list below, which sets two
# attributes).
XID_LIST = Field(
    lambda field, value: _xid_list(field, value), lambda field, text: _xid_list_text(field, text)
)


def _xid_list_text(field: str, text: str) -> Any:
    raise ConfigError(field, "cannot be set from the environment or the command line")


@dataclass(frozen=True)
class HealthConfig:
    """The `gpuDevicePlugin.health` section. Its keys are declared once here; the whole section
    needs a restart to change (the watcher is built at start). Ranges: the README's configuration
    table lists them."""

    # False: every device stays Healthy
    enabled: bool = setting("enabled", BOOL, default=True, reload=RESTART)
    ignored_xids: frozenset[int] = setting(
        "ignoredXids", XID_LIST, default=DEFAULT_IGNORED_XIDS, reload=RESTART
    )
    ignore_all_xids: bool = False  # DP_DISABLE_HEALTHCHECKS=xids or ignoredXids: all
    # critical even if ignored (DP_ENABLE_HEALTHCHECKS)
    critical_xids: frozenset[int] = setting(
        "criticalXids", XID_LIST, default=frozenset(), reload=RESTART
    )
    all_xids_critical: bool = False  # DP_ENABLE_HEALTHCHECKS=all or criticalXids: all
    # probes must pass this long, with no critical event, before recovery
    quiet_period_s: float = setting(
        "quietPeriodSeconds", Seconds(0.0, 86400.0).field(), default=60.0, reload=RESTART
    )
    # between two probe rounds over every GPU
    probe_interval_s: float = setting(
        "probeIntervalSeconds", Seconds(0.1, 3600.0).field(), default=5.0, reload=RESTART
    )
    # One NVML event wait: stop() and SIGTERM wait for it, and NVML takes it in int32 milliseconds.
    event_wait_s: float = setting(
        "eventWaitSeconds", Seconds(0.01, 1.0).field(), default=0.5, reload=RESTART
    )
    # first delay before reopening a failed event watch
    retry_initial_s: float = setting(
        "retryInitialSeconds", Seconds(0.01, 60.0).field(), default=0.5, reload=RESTART
    )
    # the backoff doubles up to this
    retry_max_s: float = setting(
        "retryMaxSeconds", Seconds(0.01, 3600.0).field(), default=30.0, reload=RESTART
    )

    def __post_init__(self) -> None:
        for name in (
            "quiet_period_s",
            "probe_interval_s",
            "event_wait_s",
            "retry_initial_s",
            "retry_max_s",
        ):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0 or (value == 0 and name != "quiet_period_s"):
                raise ValueError(
                    f"HealthConfig.{name} must be a finite positive number, got {value}"
                )

    def is_critical_xid(self, xid: int) -> bool:
        if self.all_xids_critical or xid in self.critical_xids:
            return True
        return not self.ignore_all_xids and xid not in self.ignored_xids

    def describe(self) -> str:
        if not self.enabled:
            return "health checks disabled"
        ignored = (
            "all"
            if self.ignore_all_xids
            else ",".join(map(str, sorted(self.ignored_xids))) or "none"
        )
        critical = (
            "all"
            if self.all_xids_critical
            else ",".join(map(str, sorted(self.critical_xids))) or "none"
        )
        return (
            f"ignored Xids {ignored}; forced critical Xids {critical}; quiet period "
            f"{self.quiet_period_s:g} s; "
            f"probe every {self.probe_interval_s:g} s"
        )


# Derived from the declarations: config-file key -> HealthConfig attribute, and the durations among
# them.
_KEYS = {f.metadata[SETTING].key: f.name for f in fields(HealthConfig) if SETTING in f.metadata}
KNOWN_KEYS = tuple(_KEYS)
_NUMBERS: dict[str, tuple[str, Field]] = {
    f.metadata[SETTING].key: (f.name, f.metadata[SETTING].kind)
    for f in fields(HealthConfig)
    if SETTING in f.metadata and f.type == "float"
}


def parse_health_config(
    raw: Mapping[str, Any] | None, env: Mapping[str, str], *, field: str = "health"
) -> HealthConfig:
    """The `health` section (None when absent) plus the env vars; ConfigError names the offending
    field."""
    raw = {} if raw is None else raw
    if not isinstance(raw, Mapping):
        raise ConfigError(field, f"must be a mapping, got {type(raw).__name__}")
    for key in raw:
        if key not in KNOWN_KEYS:
            path = f"{field}.{key}"
            guess = did_you_mean(path, [f"{field}.{k}" for k in KNOWN_KEYS])
            hint = f"did you mean {guess}? " if guess else ""
            raise ConfigError(path, f"unknown field; {hint}known fields: {', '.join(KNOWN_KEYS)}")
    values: dict[str, Any] = {}
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{field}.enabled", f"must be true or false, got {short(enabled)}")
    for key, (name, allowed) in _NUMBERS.items():
        if key in raw:
            values[name] = allowed.check(f"{field}.{key}", raw[key])
    ignore_all, ignored = _xid_list(f"{field}.ignoredXids", raw.get("ignoredXids", []))
    all_critical, critical = _xid_list(f"{field}.criticalXids", raw.get("criticalXids", []))
    disable = _env_tokens(DISABLE_ENV, env.get(DISABLE_ENV, ""), words=("all", "xids"))
    enable = _env_tokens(ENABLE_ENV, env.get(ENABLE_ENV, ""), words=("all",))
    if values.get("retry_max_s", HealthConfig.retry_max_s) < values.get(
        "retry_initial_s", HealthConfig.retry_initial_s
    ):
        raise ConfigError(f"{field}.retryMaxSeconds", "must not be below retryInitialSeconds")
    return HealthConfig(
        enabled=enabled and "all" not in disable.words,
        ignored_xids=DEFAULT_IGNORED_XIDS | ignored | disable.xids,
        ignore_all_xids=ignore_all or "xids" in disable.words,
        critical_xids=critical | enable.xids,
        all_xids_critical=all_critical or "all" in enable.words,
        **values,
    )


def _xid(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_XID:
        raise ConfigError(field, f"an Xid is an integer from 0 to {MAX_XID}, got {short(value)}")
    return value


def _xid_list(field: str, value: Any) -> tuple[bool, frozenset[int]]:
    """(`all` given, the Xids listed)."""
    if isinstance(value, str) and value.strip().lower() == "all":
        return True, frozenset()
    if not isinstance(value, list):
        raise ConfigError(field, f"must be a list of Xids or 'all', got {short(value)}")
    return False, frozenset(_xid(f"{field}[{i}]", item) for i, item in enumerate(value))


@dataclass(frozen=True)
class _Tokens:
    words: frozenset[str]
    xids: frozenset[int]


def _env_tokens(name: str, text: str, *, words: tuple[str, ...]) -> _Tokens:
    found: set[str] = set()
    xids: set[int] = set()
    for token in (t.strip().lower() for t in text.split(",")):
        if not token:
            continue
        if token in words:
            found.add(token)
        elif is_ascii_digits(token):
            # Checked on the text first: int() of thousands of digits is refused by Python itself.
            if len(token) > len(str(MAX_XID)) or int(token) > MAX_XID:
                raise ConfigError(
                    f"env {name}", f"an Xid is an integer from 0 to {MAX_XID}, got {short(token)}"
                )
            xids.add(int(token))
        else:
            raise ConfigError(
                f"env {name}", f"{short(token)} is neither an Xid nor one of {', '.join(words)}"
            )
    return _Tokens(frozenset(found), frozenset(xids))
