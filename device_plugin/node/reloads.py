"""What a reloaded config does to the running node, in either mode, by the fields' reload classes.

Boundary: compares two configs (config/reload.py sorts the fields) and says what to do; the runtime
does it. RESERVE fields (and the `resources`, `sharing`, `imex` sections) serve everything afresh;
AT_ONCE and NEXT_RESERVE fields are taken; RESTART fields keep their running values until the plugin
restarts, and so do the START_ONLY ones (`mode`, `driverName`: they chose what this process runs, so
a new value is never "applied" by it). Both kinds are named in one warning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from device_plugin.config.declare import Reload, get
from device_plugin.config.model import SETTINGS, Config
from device_plugin.config.reload import keep_restart_only, serving_settings

START_ONLY = tuple(d for d in SETTINGS if d.setting.reload is Reload.START_ONLY)


@dataclass(frozen=True)
class Settled:
    # the loaded config with the restart-only and start-only fields at their running values
    config: Config
    serving_changed: bool  # a RESERVE field or section changed: serve everything afresh
    needs_restart: tuple[str, ...]  # dotted paths whose new value waits for a restart


def settle(running: Config, loaded: Config) -> Settled:
    kept = keep_restart_only(running, loaded)
    config = kept.config
    held = tuple(d.path for d in START_ONLY if get(running, d.attrs) != get(loaded, d.attrs))
    for declared in START_ONLY:
        config = _with(config, declared.attrs, get(running, declared.attrs))
    changed = serving_settings(config) != serving_settings(running)
    return Settled(config, changed, kept.changed + held)


def _with(node: Any, attrs: tuple[str, ...], value: Any) -> Any:
    """A copy of the frozen dataclass tree `node` with the attribute at `attrs` replaced."""
    head, *rest = attrs
    return replace(
        node, **{head: _with(getattr(node, head), tuple(rest), value) if rest else value}
    )
