"""IMEX channels in Allocate answers, as NVIDIA's device plugin hands them out.

`imex.channelIDs` (config/imex.py) names the channels every GPU container gets. Which of them the
node has comes from the hardware layer (nvml/protocol.py ImexChannelSource): the character devices
/dev/nvidia-caps-imex-channels/channel<N>, or a simulated machine's `imex_channels`. A listed
channel that is missing is left out with a warning, or, with `imex.required`, refused as a
ConfigError (the daemon exits 2 at start; a reload keeps the running resources).

What a container gets per channel, strategy by strategy (NVIDIA's conventions, which the NVIDIA
Container Toolkit reads):
- envvar          NVIDIA_IMEX_CHANNELS=<id,...>
- volume-mounts   a mount /dev/null -> /var/run/nvidia-container-devices/imex/<id>
- cdi-*           the CDI device <vendor>/imex-channel=<id> (vendor of the configured CDI kind)
- passDeviceSpecs the device node itself, /dev/nvidia-caps-imex-channels/channel<id>, under
  nvidiaDevRoot
Boundary: pure values and one resolution step; the response builder (response_builders.py) applies
them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from device_plugin.config.imex import ImexConfig
from device_plugin.core.devices import DeviceSpec, Mount
from device_plugin.core.errors import ConfigError
from device_plugin.nvml.imex_channels import imex_channel_path
from device_plugin.nvml.protocol import ImexChannelSource, NvmlBackend

log = logging.getLogger(__name__)

IMEX_CHANNELS_ENV = "NVIDIA_IMEX_CHANNELS"
IMEX_VOLUME_MOUNTS_DIR = "/var/run/nvidia-container-devices/imex"
IMEX_CDI_CLASS = "imex-channel"


@dataclass(frozen=True)
class ImexChannels:
    """The channels every container gets, ascending; empty: none (the answers are NVIDIA's without
    IMEX)."""

    ids: tuple[int, ...] = ()

    def envs(self) -> dict[str, str]:
        return {IMEX_CHANNELS_ENV: ",".join(map(str, self.ids))} if self.ids else {}

    def mounts(self) -> tuple[Mount, ...]:
        return tuple(
            Mount(f"{IMEX_VOLUME_MOUNTS_DIR}/{i}", "/dev/null", read_only=True) for i in self.ids
        )

    def cdi_devices(self, cdi_kind: str) -> tuple[str, ...]:
        vendor = cdi_kind.split("/", 1)[0]
        return tuple(f"{vendor}/{IMEX_CDI_CLASS}={i}" for i in self.ids)

    def device_specs(self, host_dev_root: str) -> tuple[DeviceSpec, ...]:
        root = host_dev_root.rstrip("/")
        return tuple(
            DeviceSpec(imex_channel_path(i), f"{root}{imex_channel_path(i)}", "rw")
            for i in self.ids
        )


def resolve_imex_channels(
    config: ImexConfig, present: Iterable[int], *, quiet: bool = False
) -> ImexChannels:
    """The configured channels the node has. A missing one: ConfigError when `required`, else a
    warning (DEBUG when `quiet`: a periodic rescan repeats what start-up said)."""
    have = frozenset(present)
    missing = [channel for channel in config.channel_ids if channel not in have]
    if missing and config.required:
        paths = ", ".join(imex_channel_path(c) for c in missing)
        raise ConfigError(
            "imex.required",
            f"IMEX channel {', '.join(map(str, missing))} is listed in imex.channelIDs but {paths} "
            "does not exist "
            "on this node; the IMEX daemon (or the driver's NVreg_CreateImexChannel0=1) creates "
            "it. Refusing to "
            "serve; set imex.required to false to serve without it",
        )
    for channel in missing:
        log.log(
            logging.DEBUG if quiet else logging.WARNING,
            "imex.channelIDs: IMEX channel %d has no device node %s on this node; containers get "
            "no IMEX channel "
            "(set imex.required: true to refuse to serve instead)",
            channel,
            imex_channel_path(channel),
        )
    return ImexChannels(tuple(c for c in config.channel_ids if c in have))


def node_imex_channels(backend: NvmlBackend, dev_root: Path) -> frozenset[int]:
    """The IMEX channel device nodes the node has, from the hardware layer; none for a backend that
    cannot tell."""
    return (
        backend.imex_channels(dev_root) if isinstance(backend, ImexChannelSource) else frozenset()
    )
