"""Merging the sources into one file-shaped mapping, and checking it against the schema table.

Boundary: plain mappings and the table of leaf fields (config/model.py FIELDS) in; file-shaped
values or checked leaf values out, or ConfigError naming the field. What the values mean is
model.py's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from device_plugin.config.hints import unknown_key
from device_plugin.config.schema import Field, sections
from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import short


def from_text(fields: Mapping[str, Field], path: str, text: str, *, origin: str) -> Any:
    if path not in fields:
        raise ConfigError(path, f"unknown field (from {origin})")
    try:
        return fields[path].from_text(path, text)
    except ConfigError as error:
        raise ConfigError(path, f"{error.message} (from {origin})") from error


def put(raw: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node = raw
    for i, part in enumerate(parents):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(".".join(parents[: i + 1]), f"must be a mapping, got {short(child)}")
        node = child
    node[leaf] = value


def walk(fields: Mapping[str, Field], raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check every key of the known sections; return the set leaf values by dotted path."""
    known_sections = sections(fields)
    values: dict[str, Any] = {}

    def visit(prefix: str, node: Mapping[str, Any]) -> None:
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if path == "version":
                continue  # checked by parse_config
            if path in fields:
                if value is not None:  # null means "not set", as with NVIDIA's pointer fields
                    values[path] = fields[path].check(path, value)
            elif path in known_sections:
                if value is None:
                    continue
                if not isinstance(value, dict):
                    raise ConfigError(path, f"must be a mapping, got {short(value)}")
                visit(path, value)
            else:
                raise ConfigError(path, unknown_key(path, [*fields, *known_sections, "version"]))

    visit("", raw)
    return values
