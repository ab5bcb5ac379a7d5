"""NVIDIA's `imex` section: which IMEX channels every GPU container gets, and whether one must
exist.

    imex:
      channelIDs: [0]     # NVIDIA accepts [] or [0]; env IMEX_CHANNEL_IDS ("0" or ""),
      --imex-channel-ids required: true      # env IMEX_REQUIRED, --imex-required

An IMEX channel (/dev/nvidia-caps-imex-channels/channel<N>) lets a container import GPU memory that
another node of the same NVLink fabric exports. As in NVIDIA's plugin, each listed channel whose
device node exists is added to every Allocate answer (allocation/imex.py); a listed channel that is
missing is left out with a warning, or, with `required: true`, the plugin refuses to serve (exit 2,
as for a bad config). Boundary: the declarations and the value check; the node's channels are the
hardware layer's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from device_plugin.config.declare import CliFlag, Reload, setting
from device_plugin.config.schema import BOOL, Field
from device_plugin.core.ascii_digits import is_ascii_digits
from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import short

ALLOWED_CHANNEL_IDS = ((), (0,))  # NVIDIA's rule: no channel, or the default channel 0


def _channel_ids(field: str, value: Any) -> tuple[int, ...]:
    items = value if isinstance(value, list | tuple) else None
    if items is None or any(isinstance(i, bool) or not isinstance(i, int) for i in items):
        raise ConfigError(
            field, f"must be a list of channel numbers, [] or [0], got {short(value)}"
        )
    if tuple(items) not in ALLOWED_CHANNEL_IDS:
        raise ConfigError(
            field, f"must be [] or [0] (NVIDIA allows only the default channel), got {short(value)}"
        )
    return tuple(items)


def _channel_ids_text(field: str, text: str) -> list[int]:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not all(is_ascii_digits(part) for part in parts):
        raise ConfigError(
            field, f'must be comma-separated channel numbers ("0" or ""), got {short(text)}'
        )
    ids = [int(part) for part in parts]
    _channel_ids(field, ids)
    return ids  # file-shaped: the merged mapping is checked again as a whole


CHANNEL_IDS = Field(_channel_ids, _channel_ids_text)


@dataclass(frozen=True)
class ImexConfig:
    channel_ids: tuple[int, ...] = setting(
        "channelIDs",
        CHANNEL_IDS,
        default=(),
        reload=Reload.RESERVE,
        env="IMEX_CHANNEL_IDS",
        empty_means_off=True,
        cli=CliFlag(
            "--imex-channel-ids", "IMEX channels for every GPU container: 0 or none", "IDS"
        ),
    )
    required: bool = setting(
        "required",
        BOOL,
        default=False,
        reload=Reload.RESERVE,
        env="IMEX_REQUIRED",
        cli=CliFlag(
            "--imex-required", "refuse to serve when a listed IMEX channel is missing", "BOOL", True
        ),
    )
