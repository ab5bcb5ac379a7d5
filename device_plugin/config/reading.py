"""Read the config file with limits, so a hostile or broken ConfigMap is refused fast and never
hangs us.

Boundary: a path in, a plain mapping out (or ConfigError); what the keys mean is config.py's job.
Limits, each reproduced by tests/adversarial/test_config_file_limits.py:
- read with core/bounded_file.py: a regular file only (a FIFO or /dev/zero is refused at once, never
  read), at most MAX_CONFIG_BYTES (a ConfigMap holds at most 1 MiB);
- parsed with core/bounded_yaml.py: no anchors, aliases or merge keys, at most MAX_DEPTH levels of
  nesting, no duplicate keys (each named with its path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from device_plugin.core import bounded_file
from device_plugin.core.bounded_yaml import FIELD, MAX_DEPTH, load_yaml_text
from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import short_path

__all__ = [
    "FIELD",
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "load_config_file",
    "load_yaml_text",
    "read_regular_file",
]

MAX_CONFIG_BYTES = 1024 * 1024


def read_regular_file(path: Path, *, limit: int = MAX_CONFIG_BYTES, field: str = FIELD) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; ConfigError otherwise, without
    blocking."""
    hint = " (a ConfigMap holds at most 1 MiB)" if limit == MAX_CONFIG_BYTES else ""
    return bounded_file.read_regular_file(path, limit=limit, field=field, hint=hint)


def load_config_file(path: Path) -> dict[str, Any]:
    """The file's top-level mapping ({} for an empty file)."""
    data = read_regular_file(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        where = f"{short_path(path)} is not UTF-8 text"
        raise ConfigError(FIELD, f"{where}: {error.reason} at byte {error.start}") from error
    raw = load_yaml_text(text, source=str(path))
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(FIELD, f"{short_path(path)} must hold a mapping at the top level")
    return raw
