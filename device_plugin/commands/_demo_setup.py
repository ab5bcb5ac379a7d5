"""What both demos (`demo`, `demo --mode dra`) share: the default machine, the waits, the demo's
health timing, and the config the daemon would run with, moved into the demo's temporary directory.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from device_plugin.config.health import HealthConfig
from device_plugin.config.model import Config

DEFAULT_MACHINE = "dgx1-v100"
WAIT_S = 15.0
LISTED = 8  # device lines shown; the rest are counted
# The demo's health timing: recovery after 1 s of passing probes (the daemon's default is 60 s).
DEMO_HEALTH = HealthConfig(quiet_period_s=1.0, probe_interval_s=0.1, event_wait_s=0.05)
# --fast (tests): recovery after 0.2 s, and short lifecycle delays; the steps are the same.
FAST_HEALTH = HealthConfig(quiet_period_s=0.2, probe_interval_s=0.05, event_wait_s=0.05)


def demo_config(config: Config, plugin_dir: Path, fast: bool) -> Config:
    """`config` with the demo's directory, no metrics endpoint, no labels file, and the demo's
    health timing."""
    daemon = replace(
        config.daemon,
        device_plugin_dir=plugin_dir,
        metrics_address="",
        labels_file="",
        health=FAST_HEALTH if fast else DEMO_HEALTH,
    )
    return replace(config, daemon=daemon)
