"""What the DRA mode reads at start from the config and the environment: the kubelet directory and the instance.

Boundary: pure functions of the Config and an environment mapping; ConfigError names the field. The
kubelet directory is the parent of devicePluginDir (registration sockets in plugins_registry/, the DRA
socket and the checkpoint in plugins/<driver>/); the instance is the pod UID in rolling-update mode.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from device_plugin.config.model import Config
from device_plugin.config.schema import PER_INSTANCE_SOCKET_NAMES
from device_plugin.core.errors import ConfigError

POD_UID_ENV = "POD_UID"
SOCKET_NAMES_FIELD = "gpuDevicePlugin.socketNames"
_POD_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def kubelet_dir_of(config: Config) -> Path:
    return Path(config.daemon.device_plugin_dir).parent


def instance_of(config: Config, env: Mapping[str, str]) -> str:
    """The pod UID with `socketNames: per-instance` (rolling-update mode), else "" (fixed socket names).
    ConfigError when POD_UID is not a pod UID: a made-up id would change at each restart, and a crashed
    instance's sockets, which no newcomer may remove, would pile up."""
    if config.daemon.socket_names != PER_INSTANCE_SOCKET_NAMES:
        return ""
    uid = env.get(POD_UID_ENV, "").strip().lower()
    if not _POD_UID.fullmatch(uid):
        shown = f"{uid[:60]!r}" if uid else "unset"
        raise ConfigError(
            SOCKET_NAMES_FIELD, f"per-instance needs POD_UID, the pod's UID (downward API metadata.uid); it is {shown}"
        )
    return uid
