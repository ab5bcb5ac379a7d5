"""What a hot reload does with each changed field, from the fields' declared reload classes.

Boundary: compares two Config values and says what to do; the daemon does it (and logs). Classes
(config/declare.py Reload): AT_ONCE fields are simply taken; RESERVE fields (NVIDIA's `flags` and
the sections `resources`, `sharing` and `imex`) make every resource be served afresh; RESTART fields
keep their running value until the plugin restarts; NEXT_RESERVE and START_ONLY fields are taken
into the config without any action of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from device_plugin.config.declare import Declared, Reload, get
from device_plugin.config.model import SETTINGS, Config


def serving_settings(config: Config) -> tuple[object, ...]:
    """The parts of the config that decide what is served and how: a change re-serves every
    resource."""
    return tuple(get(config, d.attrs) for d in SETTINGS if d.setting.reload is Reload.RESERVE)


@dataclass(frozen=True)
class RestartOnly:
    config: Config  # the loaded config with every RESTART field kept at its running value
    # dotted paths of the RESTART fields whose loaded value differs, in declaration order
    changed: tuple[str, ...]


def keep_restart_only(running: Config, loaded: Config) -> RestartOnly:
    """The loaded config, with the fields that need a restart held at their running values."""
    restart = [d for d in SETTINGS if d.setting.reload is Reload.RESTART]
    changed = tuple(d.path for d in restart if get(running, d.attrs) != get(loaded, d.attrs))
    kept = loaded
    for declared in restart:
        kept = _with(kept, declared, get(running, declared.attrs))
    return RestartOnly(kept, changed)


def _with(config: Config, declared: Declared, value: Any) -> Config:
    """A copy of `config` with one declared attribute replaced (nested frozen dataclasses)."""

    def put(node: Any, attrs: tuple[str, ...]) -> Any:
        head, *rest = attrs
        return replace(node, **{head: put(getattr(node, head), tuple(rest)) if rest else value})

    return put(config, declared.attrs)  # type: ignore[no-any-return]
