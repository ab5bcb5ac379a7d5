"""parse_health_config: the `health` section plus NVIDIA's DP_* env vars, and the errors that name a field."""

from __future__ import annotations

from typing import Any

import pytest

from device_plugin.config.health import DEFAULT_IGNORED_XIDS, HealthConfig, parse_health_config
from device_plugin.core.errors import ConfigError


def test_defaults_ignore_the_application_xids() -> None:
    config = parse_health_config(None, {})
    assert config == HealthConfig()
    assert {13, 31, 43, 45, 68, 109} == DEFAULT_IGNORED_XIDS
    assert [x for x in (13, 31, 43, 45, 68, 109, 48, 79, 94, 95) if config.is_critical_xid(x)] == [48, 79, 94, 95]


VALID: list[tuple[str, dict[str, Any] | None, dict[str, str], dict[str, Any]]] = [
    (
        "file-durations",
        {"quietPeriodSeconds": 30, "probeIntervalSeconds": 2.5},
        {},
        {"quiet_period_s": 30.0, "probe_interval_s": 2.5},
    ),
    ("file-disabled", {"enabled": False}, {}, {"enabled": False}),
    ("file-ignored-adds", {"ignoredXids": [94]}, {}, {"ignored_xids": DEFAULT_IGNORED_XIDS | {94}}),
    ("file-ignore-all", {"ignoredXids": "all"}, {}, {"ignore_all_xids": True}),
    ("file-critical", {"criticalXids": [13]}, {}, {"critical_xids": frozenset({13})}),
    ("env-disable-all", None, {"DP_DISABLE_HEALTHCHECKS": "all"}, {"enabled": False}),
    ("env-disable-all-upper-case", None, {"DP_DISABLE_HEALTHCHECKS": "ALL"}, {"enabled": False}),
    ("env-disable-xids", None, {"DP_DISABLE_HEALTHCHECKS": "xids"}, {"ignore_all_xids": True}),
    (
        "env-disable-list",
        None,
        {"DP_DISABLE_HEALTHCHECKS": "48, 79,"},
        {"ignored_xids": DEFAULT_IGNORED_XIDS | {48, 79}},
    ),
    ("env-enable-list", None, {"DP_ENABLE_HEALTHCHECKS": "13,31"}, {"critical_xids": frozenset({13, 31})}),
    ("env-enable-all", None, {"DP_ENABLE_HEALTHCHECKS": "all"}, {"all_xids_critical": True}),
    (
        "env-adds-to-file",
        {"ignoredXids": [94], "criticalXids": [43]},
        {"DP_DISABLE_HEALTHCHECKS": "95", "DP_ENABLE_HEALTHCHECKS": "45"},
        {"ignored_xids": DEFAULT_IGNORED_XIDS | {94, 95}, "critical_xids": frozenset({43, 45})},
    ),
    (
        "env-disable-all-beats-file-enabled",
        {"enabled": True},
        {"DP_DISABLE_HEALTHCHECKS": "xids,all"},
        {"enabled": False, "ignore_all_xids": True},
    ),
    ("empty-env-is-default", {}, {"DP_DISABLE_HEALTHCHECKS": "", "DP_ENABLE_HEALTHCHECKS": " "}, {}),
]


@pytest.mark.parametrize(("raw", "env", "changes"), [v[1:] for v in VALID], ids=[v[0] for v in VALID])
def test_valid(raw: dict[str, Any] | None, env: dict[str, str], changes: dict[str, Any]) -> None:
    assert parse_health_config(raw, env) == HealthConfig(**changes)


def test_enable_list_wins_over_ignore_all() -> None:
    config = parse_health_config(None, {"DP_DISABLE_HEALTHCHECKS": "xids", "DP_ENABLE_HEALTHCHECKS": "79"})
    assert (config.is_critical_xid(79), config.is_critical_xid(48)) == (True, False)


INVALID: list[tuple[str, Any, dict[str, str], str]] = [
    ("not-a-mapping", ["x"], {}, "health"),
    ("unknown-key", {"quietPeriod": 3}, {}, "health.quietPeriod"),
    ("negative-quiet", {"quietPeriodSeconds": -1}, {}, "health.quietPeriodSeconds"),
    ("zero-probe-interval", {"probeIntervalSeconds": 0}, {}, "health.probeIntervalSeconds"),
    ("string-seconds", {"probeIntervalSeconds": "5s"}, {}, "health.probeIntervalSeconds"),
    ("bool-seconds", {"quietPeriodSeconds": True}, {}, "health.quietPeriodSeconds"),
    ("enabled-not-bool", {"enabled": "yes"}, {}, "health.enabled"),
    ("xid-not-int", {"ignoredXids": [13, "31"]}, {}, "health.ignoredXids[1]"),
    ("xid-list-not-list", {"criticalXids": 79}, {}, "health.criticalXids"),
    ("retry-max-below-initial", {"retryInitialSeconds": 5, "retryMaxSeconds": 1}, {}, "health.retryMaxSeconds"),
    ("env-disable-junk", None, {"DP_DISABLE_HEALTHCHECKS": "xid79"}, "env DP_DISABLE_HEALTHCHECKS"),
    ("env-enable-xids-word", None, {"DP_ENABLE_HEALTHCHECKS": "xids"}, "env DP_ENABLE_HEALTHCHECKS"),
]


@pytest.mark.parametrize(("raw", "env", "field"), [v[1:] for v in INVALID], ids=[v[0] for v in INVALID])
def test_invalid_names_the_field(raw: Any, env: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_health_config(raw, env)
    assert caught.value.field == field


def test_field_prefix_follows_where_the_section_lives() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_health_config({"bogus": 1}, {}, field="gpuDevicePlugin.health")
    assert caught.value.field == "gpuDevicePlugin.health.bogus"


def test_describe_lists_the_policy() -> None:
    assert parse_health_config(None, {}).describe() == (
        "ignored Xids 13,31,43,45,68,109; forced critical Xids none; quiet period 60 s; probe every 5 s"
    )
    assert parse_health_config(None, {"DP_DISABLE_HEALTHCHECKS": "all"}).describe() == "health checks disabled"
