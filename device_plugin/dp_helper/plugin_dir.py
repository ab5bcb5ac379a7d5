"""Our sockets' names in the kubelet's device-plugin directory, and which of them belong to one
resource.

Two namings (setting gpuDevicePlugin.socketNames): `fixed`, NVIDIA's `nvidia-<name>.sock`, one path
per resource on the node; `per-instance`, `nvidia-<name>-<instance id>.sock`, so that two plugin
pods of a rolling update (maxSurge 1) serve side by side. The instance id is the pod's UID (POD_UID,
downward API), which a restarted container keeps: its new socket replaces its old one instead of
piling up. The id's rule is core/instance_id.py's, the same in both modes.

Boundary: names only. The file operations on them (a private 0600 bind, identities, cleanup) are the
same in both modes and live in device_plugin.serving.socket_files; whether a sibling is served is
asked there too (served_by_someone).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from device_plugin.config.schema import PER_INSTANCE_SOCKET_NAMES
from device_plugin.core.instance_id import OUR_ID, pod_uid, socket_part
from device_plugin.serving.socket_files import served_by_someone, too_long


def socket_name(resource_name: str) -> str:
    """`nvidia.com/gpu` -> `nvidia-gpu.sock` (NVIDIA's naming, so operators find it where they
    expect)."""
    vendor, _, name = resource_name.partition("/")
    return f"{vendor.split('.')[0]}-{name}.sock"


@dataclass(frozen=True)
class SocketNaming:
    """How this instance names its sockets; `instance` is "" for the fixed names."""

    instance: str = ""

    @classmethod
    def of(cls, setting: str, env: Mapping[str, str]) -> SocketNaming:
        """ConfigError when per-instance names are asked for without a pod UID
        (core/instance_id.py)."""
        return cls(pod_uid(env)) if setting == PER_INSTANCE_SOCKET_NAMES else cls()

    @property
    def per_instance(self) -> bool:
        return bool(self.instance)

    def socket_file(self, resource_name: str, directory: Path) -> str:
        """Our socket's file name for `resource_name` in `directory`. A UID that makes the path too
        long for a unix socket is replaced by its 12-digit digest (core/instance_id.py)."""
        fixed = socket_name(resource_name)
        if not self.instance:
            return fixed
        stem = fixed.removesuffix(".sock")
        part = socket_part(
            self.instance, lambda uid: too_long(directory / f"{stem}-{uid}.sock") is None
        )
        return f"{stem}-{part}.sock"

    def live_siblings(self, resource_name: str, directory: Path, own: str) -> list[str]:
        """Sockets of the same resource, in either naming, that another process serves now (ours
        left out).

        Asked at stop: when a newer instance serves the resource, the kubelet must not hear our
        empty list."""
        stem = re.escape(socket_name(resource_name).removesuffix(".sock"))
        pattern = re.compile(rf"{stem}(?:-{OUR_ID})?\.sock\Z")
        try:
            names = sorted(entry.name for entry in directory.iterdir())
        except OSError:  # the directory is gone: nobody serves there
            return []
        return [
            n for n in names if n != own and pattern.match(n) and served_by_someone(directory / n)
        ]
