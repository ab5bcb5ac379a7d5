"""parse_sharing: a raw `sharing` section parsed and resolved against a node's GPUs in one step, for tests.

Production does the two steps apart (config/sharing.py parses at load, timeslice.resolve_sharing checks
the GPUs at composition); tests that start from a raw mapping call both through this."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from device_plugin.config.sharing import parse_sharing_section
from device_plugin.config.sharing_model import Placement, SharingConfig
from device_plugin.timeslice.config import GpuRef, resolve_sharing


def parse_sharing(
    raw: Mapping[str, Any] | None,
    *,
    gpus: Sequence[GpuRef],
    default_placement: Placement | str = Placement.DISTRIBUTED,
) -> SharingConfig:
    return resolve_sharing(parse_sharing_section(raw, default_placement=default_placement), gpus)
