"""The Preparer's value types and the claim fetcher it takes (claims/prepare.py says how).

Boundary: types only; no logic beyond their fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from device_plugin.kubelet_plugin.checkpoint.store import PreparedDevice


class ClaimFetcher(Protocol):
    async def fetch_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The ResourceClaim object as a dict, or None when it does not exist (404). Awaited on the loop."""
        ...


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    uid: str
    name: str


@dataclass(frozen=True)
class ClaimRead:
    """What reading one ResourceClaim gave: its body (None: there is no such claim), or why it failed."""

    body: Mapping[str, Any] | None = None
    failure: str = ""  # "" when the read did not fail


@dataclass(frozen=True)
class PrepareResult:
    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""
