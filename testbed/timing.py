"""Lifecycle timing for tests: short delays so suites stay fast; the behaviour is the defaults' behaviour."""

from __future__ import annotations

from device_plugin.core.backoff import Backoff
from device_plugin.dp_helper.lifecycle import LifecycleTiming

FAST_LIFECYCLE = LifecycleTiming(
    register_timeout_s=10.0,
    backoff=Backoff(initial_s=0.05, factor=2.0, max_s=0.5),
    stream_lost_grace_s=0.3,
    stop_grace_s=0.2,
    debounce_s=0.05,
)
