"""Shape checks for the config sections `resources`, `sharing` and `imex` (`resources`, `imex` kept raw).

They follow NVIDIA's v1 schema so existing files load; what each section *means* is decided by its
consumer (config/sharing.py for `sharing`). Checked here: known keys only, types, and the rules NVIDIA
enforces at load time (replicas >= 2, non-empty resource lists, IMEX channel IDs). Errors name the
field by dotted path with list positions, e.g. `sharing.timeSlicing.resources[0].replicas`.
"""

from __future__ import annotations

from typing import Any

from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import short


def _mapping(field: str, value: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(field, f"must be a mapping, got {short(value)}")
    for key in value:
        if key not in allowed:
            raise ConfigError(f"{field}.{key}", "unknown field")
    return value


def _list(field: str, value: Any, *, non_empty: bool = False) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigError(field, f"must be a list, got {short(value)}")
    if non_empty and not value:
        raise ConfigError(field, "must not be empty")
    return value


def _type(field: str, value: Any, kind: type) -> None:
    if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise ConfigError(field, f"must be {kind.__name__}, got {short(value)}")


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
                    raise ConfigError(f"{where}.{key}", "is required and must be a non-empty string")
    return section


def check_sharing(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    section = _mapping("sharing", value, ("timeSlicing", "mps"))
    for kind in ("timeSlicing", "mps"):
        if section.get(kind) is None:
            continue
        where = f"sharing.{kind}"
        shared = _mapping(where, section[kind], ("renameByDefault", "failRequestsGreaterThanOne", *_OURS, "resources"))
        _type(f"{where}.renameByDefault", shared.get("renameByDefault"), bool)
        _type(f"{where}.failRequestsGreaterThanOne", shared.get("failRequestsGreaterThanOne"), bool)
        for i, entry in enumerate(_list(f"{where}.resources", shared.get("resources"), non_empty=True)):
            _check_replicated(f"{where}.resources[{i}]", entry)
    return section


# Documented ranges (README, "Configuration"). The kubelet keeps every replica in memory and in its
# checkpoint, so more than 1024 is a typo (config/sharing.py enforces the same bound).
MAX_REPLICAS = 1024
MAX_DEVICE_COUNT = 1024  # GPUs a `devices: <count>` entry may name; no node has more

# Our extensions to NVIDIA's sharing keys, at the top of timeSlicing and per resource; their values are
# checked by config/sharing.py, which gives them meaning.
_OURS = ("requireDistinctGPUs", "allocationPolicy")


def _check_replicated(where: str, entry: Any) -> None:
    _mapping(where, entry, ("name", "rename", "devices", "replicas", *_OURS))
    if not isinstance(entry.get("name"), str) or not entry["name"]:
        raise ConfigError(f"{where}.name", "is required and must be a non-empty string")
    _type(f"{where}.rename", entry.get("rename"), str)
    replicas = entry.get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or not 2 <= replicas <= MAX_REPLICAS:
        raise ConfigError(
            f"{where}.replicas", f"is required and must be an integer from 2 to {MAX_REPLICAS}, got {short(replicas)}"
        )
    devices = entry.get("devices")
    if devices is None or devices == "all":
        return
    if isinstance(devices, int) and not isinstance(devices, bool):
        if not 1 <= devices <= MAX_DEVICE_COUNT:
            message = f"a device count is from 1 to {MAX_DEVICE_COUNT}, got {short(devices)}"
            raise ConfigError(f"{where}.devices", message)
        return
    for j, item in enumerate(_list(f"{where}.devices", devices, non_empty=True)):
        if not isinstance(item, str | int) or isinstance(item, bool) or str(item) == "":
            raise ConfigError(f"{where}.devices[{j}]", f"must be a GPU index, MIG index or UUID, got {short(item)}")


def check_imex(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    section = _mapping("imex", value, ("channelIDs", "required"))
    _type("imex.required", section.get("required"), bool)
    channels = section.get("channelIDs")
    if channels is not None and _list("imex.channelIDs", channels) not in ([], [0]):
        raise ConfigError("imex.channelIDs", f"must be [] or [0], got {short(channels)}")
    return section
