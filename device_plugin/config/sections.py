"""Shape checks for the config section `resources`, kept in its validated raw shape.

They follow NVIDIA's v1 schema so existing files load; what each section *means* is decided by its
consumer. Checked here: known keys only, types, and the rules NVIDIA enforces at load time
(non-empty names). Errors name the field by dotted path with list positions, e.g.
`resources.gpus[0].name`. RESOURCES is the section's declared kind (config/model.py); `sharing` is
parsed, and checked, once, by config/sharing.py; `imex` is a section of declared settings
(config/imex.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from device_plugin.config.hints import unknown_key
from device_plugin.config.resource_names import parse_resource_naming
from device_plugin.config.schema import Field, no_text
from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import short


def _mapping(field: str, value: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(field, f"must be a mapping, got {short(value)}")
    for key in value:
        if key not in allowed:
            raise ConfigError(
                f"{field}.{key}", unknown_key(f"{field}.{key}", [f"{field}.{a}" for a in allowed])
            )
    return value


def _list(field: str, value: Any, *, non_empty: bool = False) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigError(field, f"must be a list, got {short(value)}")
    if non_empty and not value:
        raise ConfigError(field, "must not be empty")
    return value


def check_resources(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    section = _mapping("resources", value, ("gpus", "mig"))
    for kind in ("gpus", "mig"):
        if section.get(kind) is None:
            continue
        for i, entry in enumerate(_list(f"resources.{kind}", section[kind])):
            where = f"resources.{kind}[{i}]"
            _mapping(where, entry, ("pattern", "name"))
            for key in ("pattern", "name"):
                if not isinstance(entry.get(key), str) or not entry[key]:
                    raise ConfigError(
                        f"{where}.{key}", "is required and must be a non-empty string"
                    )
    # the names and patterns, checked at load (config/resource_names.py)
    parse_resource_naming(section)
    return section


def _frozen(value: dict[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(value)


RESOURCES = Field(lambda _field, value: _frozen(check_resources(value)), no_text)
