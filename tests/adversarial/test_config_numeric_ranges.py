"""Every numeric setting has a documented range, enforced at load; NaN, infinities and booleans are refused.

Reproduces issue 11: `eventWaitSeconds: 1e10` marked every GPU Unhealthy for good (NVML takes the
wait in int32 milliseconds), `probeIntervalSeconds: 1e300` killed the probe thread, and `1e-9` burned
a core. The ranges are those of docs/configuration.md ("Numeric ranges"); the edges load, one step
outside does not, and the error names the field.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from device_plugin.config.loader import load_config
from device_plugin.config.model import parse_config
from device_plugin.core.errors import ConfigError

H = "gpuDevicePlugin.health"
NAN, INF = float("nan"), float("inf")


def health(key: str, value: Any) -> dict[str, Any]:
    return {"gpuDevicePlugin": {"health": {key: value}}}


RESCAN = "gpuDevicePlugin.rescanIntervalSeconds"


def rescan(value: Any) -> dict[str, Any]:
    return {"gpuDevicePlugin": {"rescanIntervalSeconds": value}}


def replicas(value: Any) -> dict[str, Any]:
    return {"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": value}]}}}


def device_count(value: Any) -> dict[str, Any]:
    entry = {"name": "nvidia.com/gpu", "replicas": 2, "devices": value}
    return {"sharing": {"timeSlicing": {"resources": [entry]}}}


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("event-wait-1e10-never-expires", health("eventWaitSeconds", 1e10), f"{H}.eventWaitSeconds"),
    ("event-wait-above-1s", health("eventWaitSeconds", 1.5), f"{H}.eventWaitSeconds"),
    ("event-wait-below-10ms", health("eventWaitSeconds", 0.001), f"{H}.eventWaitSeconds"),
    ("probe-interval-1e300", health("probeIntervalSeconds", 1e300), f"{H}.probeIntervalSeconds"),
    ("probe-interval-1e-9-spins", health("probeIntervalSeconds", 1e-9), f"{H}.probeIntervalSeconds"),
    ("probe-interval-above-1h", health("probeIntervalSeconds", 3601), f"{H}.probeIntervalSeconds"),
    ("probe-interval-nan", health("probeIntervalSeconds", NAN), f"{H}.probeIntervalSeconds"),
    ("quiet-period-inf", health("quietPeriodSeconds", INF), f"{H}.quietPeriodSeconds"),
    ("quiet-period-above-a-day", health("quietPeriodSeconds", 86401), f"{H}.quietPeriodSeconds"),
    ("quiet-period-negative", health("quietPeriodSeconds", -1), f"{H}.quietPeriodSeconds"),
    ("retry-initial-above-a-minute", health("retryInitialSeconds", 61), f"{H}.retryInitialSeconds"),
    ("retry-initial-zero", health("retryInitialSeconds", 0), f"{H}.retryInitialSeconds"),
    ("retry-max-above-1h", health("retryMaxSeconds", 1e9), f"{H}.retryMaxSeconds"),
    ("retry-max-minus-inf", health("retryMaxSeconds", -INF), f"{H}.retryMaxSeconds"),
    ("xid-above-65535", health("ignoredXids", [2**70]), f"{H}.ignoredXids[0]"),
    ("rescan-1e-9-spins", rescan(1e-9), RESCAN),
    ("rescan-below-1s", rescan(0.5), RESCAN),
    ("rescan-nan", rescan(NAN), RESCAN),
    ("rescan-bool", rescan(True), RESCAN),
    ("replicas-above-1024", replicas(1025), "sharing.timeSlicing.resources[0].replicas"),
    ("replicas-huge", replicas(10**30), "sharing.timeSlicing.resources[0].replicas"),
    ("device-count-above-1024", device_count(1025), "sharing.timeSlicing.resources[0].devices"),
]


@pytest.mark.parametrize(("raw", "field"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_value_outside_its_range_is_refused(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert caught.value.field == field, str(caught.value)
    assert len(str(caught.value)) <= 200 and "\n" not in str(caught.value)


EDGES: list[tuple[str, dict[str, Any]]] = [
    ("event-wait-10ms", health("eventWaitSeconds", 0.01)),
    ("event-wait-1s", health("eventWaitSeconds", 1)),
    ("probe-interval-100ms", health("probeIntervalSeconds", 0.1)),
    ("probe-interval-1h", health("probeIntervalSeconds", 3600)),
    ("quiet-period-zero", health("quietPeriodSeconds", 0)),
    ("quiet-period-a-day", health("quietPeriodSeconds", 86400)),
    ("retry-initial-a-minute", {"gpuDevicePlugin": {"health": {"retryInitialSeconds": 60, "retryMaxSeconds": 60}}}),
    ("retry-max-1h", health("retryMaxSeconds", 3600)),
    ("xid-65535", health("criticalXids", [65535])),
    ("rescan-1s", rescan(1)),
    ("rescan-a-day", rescan(86400)),
    ("replicas-1024", replicas(1024)),
    ("device-count-1024", device_count(1024)),
]


@pytest.mark.parametrize("raw", [c[1] for c in EDGES], ids=[c[0] for c in EDGES])
def test_the_edges_of_each_range_load(raw: dict[str, Any]) -> None:
    parse_config(raw)


TEXT_REFUSED: list[tuple[str, dict[str, str], str]] = [
    ("env-rescan-nan", {"RESCAN_INTERVAL_SECONDS": "nan"}, RESCAN),
    ("env-rescan-1e-9", {"RESCAN_INTERVAL_SECONDS": "1e-9"}, RESCAN),
    ("env-rescan-inf", {"RESCAN_INTERVAL_SECONDS": "inf"}, RESCAN),
    # int() refuses more than 4,300 digits with a ValueError that would escape as a traceback.
    ("env-xid-of-5000-digits", {"DP_DISABLE_HEALTHCHECKS": "9" * 5000}, "env DP_DISABLE_HEALTHCHECKS"),
    ("env-xid-above-65535", {"DP_ENABLE_HEALTHCHECKS": "65536"}, "env DP_ENABLE_HEALTHCHECKS"),
]


@pytest.mark.parametrize(("env", "field"), [c[1:] for c in TEXT_REFUSED], ids=[c[0] for c in TEXT_REFUSED])
def test_env_values_obey_the_same_ranges(env: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(env=env)
    assert caught.value.field.startswith(field), str(caught.value)
    assert len(str(caught.value)) <= 200


def test_the_effective_config_line_is_bounded() -> None:
    # flags.gfd is accepted raw (GFD's settings in a shared ConfigMap), so it can be as large as the file.
    gfd = {f"key{i}": "v" * 100 for i in range(5000)}
    config = parse_config({"flags": {"gfd": gfd}})
    line = config.describe()
    assert "\n" not in line and len(line) <= 8192 + 100
    assert line.endswith("characters in all)")
    small = parse_config({"flags": {"migStrategy": "mixed"}}).describe()
    assert json.loads(small)["flags"]["mig_strategy"] == "mixed"  # a normal config stays whole JSON
