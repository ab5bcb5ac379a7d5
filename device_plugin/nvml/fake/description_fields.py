"""Small typed readers for machine-description YAML: each checks one value and names the field it
reads.

Boundary: type and range checks that raise MachineDescriptionError with a dotted field path; no
schema knowledge (which keys a section has is the caller's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from device_plugin.core.errors import MachineDescriptionError


def mapping(
    value: object, field: str, allowed: frozenset[str], required: tuple[str, ...]
) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MachineDescriptionError(field, f"must be a mapping, not {kind(value)}")
    for key in value:
        if key not in allowed:
            prefix = "" if field == "machine" else f"{field}."
            raise MachineDescriptionError(
                f"{prefix}{key}", f"unknown key; allowed: {', '.join(sorted(allowed))}"
            )
    for key in required:
        if key not in value:
            prefix = "" if field == "machine" else f"{field}."
            raise MachineDescriptionError(f"{prefix}{key}", "is required")
    return value


def list_of(value: object, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise MachineDescriptionError(field, f"must be a list, not {kind(value)}")
    return value


def string(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise MachineDescriptionError(field, f"must be a string (quote it), not {kind(value)}")
    if not value.strip():
        raise MachineDescriptionError(field, "must not be empty")
    return value.strip()


def integer(
    value: object, field: str, minimum: int | None = None, maximum: int | None = None
) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MachineDescriptionError(field, f"must be an integer, not {kind(value)}")
    if minimum is not None and value < minimum:
        raise MachineDescriptionError(field, f"{value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise MachineDescriptionError(field, f"{value} is above the maximum {maximum}")
    return value


def gpu_index(value: object, field: str, gpu_count: int) -> int:
    index = integer(value, field)
    if not 0 <= index < gpu_count:
        raise MachineDescriptionError(
            field, f"there is no GPU {index}; this machine has GPUs 0..{gpu_count - 1}"
        )
    return index


def kind(value: object) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"
