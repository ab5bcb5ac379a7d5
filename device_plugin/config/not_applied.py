"""Accepted but not applied: NVIDIA's fields this plugin takes (so an existing ConfigMap loads
unchanged) and does nothing with, named in one warning whenever a config is taken, at start and on
every reload.

Boundary: which set fields have no effect, from their declarations (config/declare.py not_applied:
the values that do nothing here, e.g. `gdsEnabled: true`, a non-empty `resources`); the callers log
the line (`run` at start, config/file_reload.py on a reload, the commands that show what `run` would
serve). docs/migrating.md "Accepted but not applied" says, per field, what NVIDIA's plugin does with
it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from device_plugin.config.declare import get
from device_plugin.config.model import SETTINGS, Config

DOC = "docs/migrating.md#accepted-but-not-applied"
DECLARED = tuple(d for d in SETTINGS if d.setting.not_applied is not None)
# Applied in device-plugin mode only: DRA serves no resource names and hands out no IMEX channels
# (NVIDIA's DRA driver does that through ComputeDomains), so in mode dra these are named too.
DEVICE_PLUGIN_ONLY: tuple[tuple[str, Callable[[Config], bool]], ...] = (
    ("resources", lambda c: any(c.resources.get(kind) for kind in ("gpus", "mig"))),
    ("imex.channelIDs", lambda c: bool(c.imex.channel_ids)),
)

log = logging.getLogger(__name__)


def not_applied(config: Config) -> tuple[str, ...]:
    """Dotted paths of the fields set to a value that has no effect here, in declaration order."""
    found = []
    for declared in DECLARED:
        check = declared.setting.not_applied
        assert check is not None
        if check(get(config, declared.attrs)):
            found.append(declared.path)
    if config.daemon.mode == "dra":
        found += [path for path, is_set in DEVICE_PLUGIN_ONLY if is_set(config)]
    return tuple(found)


def not_applied_warning(config: Config) -> str | None:
    fields = not_applied(config)
    if not fields:
        return None
    return (
        f"config: accepted but not applied (no effect in this plugin): {', '.join(fields)}; "
        f"see {DOC} for what NVIDIA's plugin does with each"
    )


def warn_not_applied(config: Config) -> None:
    """One WARNING line naming every field of `config` that has no effect, or nothing."""
    message = not_applied_warning(config)
    if message is not None:
        log.warning("%s", message)
