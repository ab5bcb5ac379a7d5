"""Device IDs, parsed and formatted in one place.

- whole GPU: its UUID ("GPU-...")
- MIG device: its MIG UUID ("MIG-...")
- time-sliced replica: "<base id>::<n>", n >= 0
The kubelet's proto allows at most 63 characters per ID; real UUIDs plus "::NN" stay well below.
"""

from __future__ import annotations

from dataclasses import dataclass

from device_plugin.core.ascii_digits import is_ascii_digits

REPLICA_SEPARATOR = "::"


@dataclass(frozen=True)
class DeviceId:
    base: str  # the GPU or MIG UUID
    replica: int | None = None  # None for a device that is not a replica

    def __str__(self) -> str:
        return (
            self.base if self.replica is None else f"{self.base}{REPLICA_SEPARATOR}{self.replica}"
        )


def format_replica_id(base: str, replica: int) -> str:
    return str(DeviceId(base, replica))


def parse_device_id(text: str) -> DeviceId:
    """Parse an ID; raises ValueError for a malformed one (empty base, bad replica number)."""
    base, sep, replica = text.partition(REPLICA_SEPARATOR)
    if not base:
        raise ValueError(f"device ID {text!r} has an empty base")
    if not sep:
        return DeviceId(base)
    if not is_ascii_digits(replica):
        raise ValueError(f"device ID {text!r}: replica suffix must be a non-negative integer")
    return DeviceId(base, int(replica))
