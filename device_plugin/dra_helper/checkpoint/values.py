"""What the checkpoint records of a prepared claim: its devices, each whole or a share of one.

Boundary: frozen value types only (format.py writes and reads them, store.py keeps them, the
Preparer and the driver make them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Share:
    """One share of a device several claims hold (consumable capacity): the scheduler's shareID, how
    much of the device's memory it was charged, of how much (MiB, as the device was published then),
    and the percent of its compute (0: none asked; written only when not 0, so older entries read as
    0)."""

    share_id: str
    memory_mib: int
    of_mib: int
    compute_percent: int = 0


@dataclass(frozen=True)
class PreparedDevice:
    request_names: tuple[str, ...]
    pool_name: str
    device_name: str
    cdi_device_ids: tuple[str, ...]
    # the allocation's adminAccess (claims/exclusion.py: such a holder shares the device)
    admin_access: bool = False
    share: Share | None = None  # a share of the device, not all of it (dra/memory_shares.py)


@dataclass(frozen=True)
class PreparedClaim:
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]
