"""What the DRA mode reads at start from the config and the environment: the kubelet directory and
the instance.

Boundary: pure functions of the Config and an environment mapping; ConfigError names the field. The
kubelet directory is the parent of devicePluginDir (registration sockets in plugins_registry/, the
DRA socket and the checkpoint in plugins/<driver>/); the instance is the pod UID in rolling-update
mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from device_plugin.config.model import Config
from device_plugin.config.schema import PER_INSTANCE_SOCKET_NAMES
from device_plugin.core.instance_id import pod_uid


def kubelet_dir_of(config: Config) -> Path:
    return Path(config.daemon.device_plugin_dir).parent


def instance_of(config: Config, env: Mapping[str, str]) -> str:
    """The pod UID with `socketNames: per-instance` (rolling-update mode), else "" (fixed socket
    names). ConfigError when POD_UID is not a pod UID (the rule of both modes:
    core/instance_id.py)."""
    if config.daemon.socket_names != PER_INSTANCE_SOCKET_NAMES:
        return ""
    return pod_uid(env)
