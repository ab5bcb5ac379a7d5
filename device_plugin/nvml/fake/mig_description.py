"""The per-GPU `mig:` key of machine descriptions: parse it and check the layout against the model.

Schema (inside one `gpus[i]` entry):

    mig:
      enabled: true            # required; MIG mode (current)
      pending: true            # optional; the pending mode, defaults to `enabled`
      devices:                 # optional; empty when omitted
        - {profile: "3g.40gb", count: 1}   # let the fake place them ...
        - {profile: "2g.20gb", start: 4}   # ... or give the memory-slice start explicitly

A layout that NVML could not create is a MachineDescriptionError naming the field
("gpus[2].mig.devices[1].profile"): a profile the model lacks, MIG on a model without MIG, a start
that is not one of the profile's placements, overlapping placements, more instances of a profile
than the model allows, more compute or memory slices than the GPU has. Counted entries are placed
after the explicit ones by an exhaustive search (a GPU has 8 memory slices, so it is tiny), largest
profiles first, lowest start first: the same input always gives the same placements.
Boundary: pure validation over device_plugin.nvml.mig_profiles; the fake turns a MigLayout into
devices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from device_plugin.core.errors import MachineDescriptionError
from device_plugin.nvml.mig_profiles import profile_table
from device_plugin.nvml.mig_types import MigProfile, MigProfileTable

_MIG_KEYS = frozenset({"enabled", "pending", "devices"})
_DEVICE_KEYS = frozenset({"profile", "count", "start"})


@dataclass(frozen=True)
class MigPlacement:
    profile: MigProfile
    start: int


@dataclass(frozen=True)
class MigLayout:
    """A validated MIG state of one GPU; `placements` sorted by start."""

    enabled: bool
    pending: bool
    placements: tuple[MigPlacement, ...] = ()


def parse_mig(raw: object, where: str, model: str) -> MigLayout:
    """Validate one GPU's `mig:` mapping (`where` is its field path, e.g. "gpus[2].mig")."""
    if not isinstance(raw, Mapping):
        raise MachineDescriptionError(where, f"must be a mapping, not {_kind(raw)}")
    for key in raw:
        if key not in _MIG_KEYS:
            raise MachineDescriptionError(
                f"{where}.{key}", f"unknown key; allowed: {', '.join(sorted(_MIG_KEYS))}"
            )
    if "enabled" not in raw:
        raise MachineDescriptionError(f"{where}.enabled", "is required (true or false)")
    enabled = _bool(raw["enabled"], f"{where}.enabled")
    pending = _bool(raw["pending"], f"{where}.pending") if "pending" in raw else enabled
    devices = raw.get("devices")
    if devices is None:
        devices = []
    if not isinstance(devices, list):
        raise MachineDescriptionError(f"{where}.devices", f"must be a list, not {_kind(devices)}")
    return build_layout(model, devices, where, enabled=enabled, pending=pending)


def build_layout(
    model: str,
    devices: Sequence[object],
    where: str,
    *,
    enabled: bool = True,
    pending: bool | None = None,
) -> MigLayout:
    """Validate and place a list of `{profile, count}` / `{profile, start}` entries for a GPU
    model."""
    pending = enabled if pending is None else pending
    table = profile_table(model)
    if table is None and (enabled or pending):
        field = f"{where}.enabled" if enabled else f"{where}.pending"
        raise MachineDescriptionError(
            field, f"{model!r} does not support MIG (no MIG profile table for it)"
        )
    if not enabled:
        if devices:
            raise MachineDescriptionError(
                f"{where}.devices", "MIG is disabled on this GPU; it can have no MIG devices"
            )
        return MigLayout(enabled=False, pending=pending)
    assert table is not None  # enabled implies a table, checked above
    fixed: list[tuple[MigPlacement, int]] = []  # (placement, entry number)
    counted: list[tuple[MigProfile, int]] = []
    for i, entry in enumerate(devices):
        field = f"{where}.devices[{i}]"
        profile, start, count = _parse_entry(entry, field, table)
        if start is not None:
            fixed.append((MigPlacement(profile, start), i))
        else:
            counted.extend((profile, i) for _ in range(count))
    _check_fixed(fixed, where)
    entries = [(p.profile, f"{where}.devices[{i}].start") for p, i in fixed]
    entries += [(p, f"{where}.devices[{i}].count") for p, i in counted]
    _check_totals(table, entries, where)
    placed = _place(table, [p for p, _ in fixed], [p for p, _ in counted])
    if placed is None:
        raise MachineDescriptionError(
            f"{where}.devices",
            "no placement fits these profiles together on one GPU (placements: "
            + "; ".join(f"{p.name} at {list(p.placement_starts)}" for p in table.profiles)
            + ")",
        )
    return MigLayout(
        enabled=True, pending=pending, placements=tuple(sorted(placed, key=lambda p: p.start))
    )


def _parse_entry(
    entry: object, field: str, table: MigProfileTable
) -> tuple[MigProfile, int | None, int]:
    if not isinstance(entry, Mapping):
        raise MachineDescriptionError(
            field, f"must be a mapping like {{profile: ..., count: N}}, not {_kind(entry)}"
        )
    for key in entry:
        if key not in _DEVICE_KEYS:
            raise MachineDescriptionError(
                f"{field}.{key}", f"unknown key; allowed: {', '.join(sorted(_DEVICE_KEYS))}"
            )
    if "profile" not in entry:
        raise MachineDescriptionError(f"{field}.profile", "is required")
    name = entry["profile"]
    if not isinstance(name, str) or not name.strip():
        raise MachineDescriptionError(
            f"{field}.profile", f'must be a profile name like "1g.10gb", not {_kind(name)}'
        )
    profile = table.profile(name.strip())
    if profile is None:
        raise MachineDescriptionError(
            f"{field}.profile",
            f"{table.model} has no MIG profile {name!r}; it has {', '.join(table.names)}",
        )
    if "count" in entry and "start" in entry:
        raise MachineDescriptionError(f"{field}.start", "give either count or start, not both")
    if "start" in entry:
        start = _int(entry["start"], f"{field}.start")
        if start not in profile.placement_starts:
            raise MachineDescriptionError(
                f"{field}.start",
                f"{profile.name} can start at memory slice {list(profile.placement_starts)}, not "
                f"{start}",
            )
        return profile, start, 1
    count = _int(entry["count"], f"{field}.count") if "count" in entry else 1
    if count < 1:
        raise MachineDescriptionError(f"{field}.count", f"{count} is below the minimum 1")
    return profile, None, count


def _check_fixed(fixed: list[tuple[MigPlacement, int]], where: str) -> None:
    owner: dict[int, int] = {}
    for placement, i in fixed:
        for slot in range(placement.start, placement.start + placement.profile.memory_slices):
            if slot in owner:
                raise MachineDescriptionError(
                    f"{where}.devices[{i}].start",
                    f"{placement.profile.name} at {placement.start} overlaps "
                    f"devices[{owner[slot]}] "
                    f"(memory slice {slot})",
                )
            owner[slot] = i


def _check_totals(
    table: MigProfileTable, entries: list[tuple[MigProfile, str]], where: str
) -> None:
    """Instance limits per profile, then the GPU's compute and memory slices. `entries`: (profile,
    field)."""
    per_profile: dict[str, int] = {}
    for profile, _ in entries:
        per_profile[profile.name] = per_profile.get(profile.name, 0) + 1
    # name the last entry of a profile: it went over the limit
    for profile, field in reversed(entries):
        if per_profile[profile.name] > profile.max_instances:
            raise MachineDescriptionError(
                field,
                f"{per_profile[profile.name]} x {profile.name} in all; {table.model} allows at "
                "most "
                f"{profile.max_instances}",
            )
    compute = sum(p.compute_slices for p, _ in entries)
    memory = sum(p.memory_slices for p, _ in entries)
    if compute > table.compute_slices or memory > table.memory_slices:
        raise MachineDescriptionError(
            f"{where}.devices",
            f"needs {compute} compute and {memory} memory slices; a {table.model} has "
            f"{table.compute_slices} "
            f"and {table.memory_slices}",
        )


def _place(
    table: MigProfileTable, fixed: list[MigPlacement], todo: list[MigProfile]
) -> list[MigPlacement] | None:
    """Place `todo` around `fixed` (exhaustive, deterministic: largest first, lowest start
    first)."""
    used = [False] * table.memory_slices
    for placement in fixed:
        for slot in range(placement.start, placement.start + placement.profile.memory_slices):
            used[slot] = True
    order = sorted(todo, key=lambda p: (-p.memory_slices, -p.compute_slices, p.name))
    chosen: list[MigPlacement] = []

    def search(k: int) -> bool:
        if k == len(order):
            return True
        profile = order[k]
        # Identical profiles are interchangeable: place them in increasing start order only.
        floor = chosen[-1].start + 1 if k and order[k - 1] == profile else 0
        for start in profile.placement_starts:
            if start < floor:
                continue
            slots = range(start, start + profile.memory_slices)
            if any(used[s] for s in slots):
                continue
            for s in slots:
                used[s] = True
            chosen.append(MigPlacement(profile, start))
            if search(k + 1):
                return True
            chosen.pop()
            for s in slots:
                used[s] = False
        return False

    return [*fixed, *chosen] if search(0) else None


def _bool(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise MachineDescriptionError(field, f"must be true or false, not {_kind(value)}")
    return value


def _int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MachineDescriptionError(field, f"must be an integer, not {_kind(value)}")
    return value


def _kind(value: object) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"
