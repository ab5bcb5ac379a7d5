"""Our sockets' names in the kubelet's device-plugin directory, and which of them belong to one resource.

Two namings (setting gpuDevicePlugin.socketNames): `fixed`, NVIDIA's `nvidia-<name>.sock`, one path per
resource on the node; `per-instance`, `nvidia-<name>-<instance id>.sock`, so that two plugin pods of a
rolling update (maxSurge 1) serve side by side. The instance id is the pod's UID (POD_UID, downward
API), which a restarted container keeps: its new socket replaces its old one instead of piling up.

Boundary: names only. The file operations on them (a private 0600 bind, identities, cleanup) are the
same in both modes and live in device_plugin.serving.socket_files; whether a sibling is served is
asked there too (served_by_someone).
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from device_plugin.config.schema import PER_INSTANCE_SOCKET_NAMES
from device_plugin.serving.socket_files import served_by_someone, too_long

log = logging.getLogger(__name__)

POD_UID_ENV = "POD_UID"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_SHORT_LEN = 12  # hex digits of a short id: a digest of the UID, or a random fallback
# The id shapes we write, and only those: a resource `gpu-shared` is not an instance of `gpu`.
_ID_PATTERN = rf"(?:[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}|[0-9a-f]{{{_SHORT_LEN}}})"


def socket_name(resource_name: str) -> str:
    """`nvidia.com/gpu` -> `nvidia-gpu.sock` (NVIDIA's naming, so operators find it where they expect)."""
    vendor, _, name = resource_name.partition("/")
    return f"{vendor.split('.')[0]}-{name}.sock"


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_SHORT_LEN]


def instance_id(env: Mapping[str, str]) -> str:
    """This instance's id: the pod UID (lowercased), a digest of any other POD_UID text, else a random one.

    Each fallback is logged: a random id changes at every container restart, so a crashed container's
    socket stays behind (unserved, harmless) until the kubelet's next restart cleans the directory."""
    uid = env.get(POD_UID_ENV, "").strip().lower()
    if _UUID.match(uid):
        return uid
    if uid:
        digest = _short(uid)
        log.warning("%s=%r is not a pod UID; using its digest %s as the instance id", POD_UID_ENV, uid[:60], digest)
        return digest
    token = secrets.token_hex(_SHORT_LEN // 2)
    log.warning(
        "%s is unset (set it from the downward API, metadata.uid); using the random instance id %s, which "
        "changes at every container restart",
        POD_UID_ENV,
        token,
    )
    return token


@dataclass(frozen=True)
class SocketNaming:
    """How this instance names its sockets; `instance` is "" for the fixed names."""

    instance: str = ""

    @classmethod
    def of(cls, setting: str, env: Mapping[str, str]) -> SocketNaming:
        return cls(instance_id(env)) if setting == PER_INSTANCE_SOCKET_NAMES else cls()

    @property
    def per_instance(self) -> bool:
        return bool(self.instance)

    def socket_file(self, resource_name: str, directory: Path) -> str:
        """Our socket's file name for `resource_name` in `directory`. A UID that makes the path too long
        for a unix socket is replaced by its 12-digit digest (still unique among a node's few pods)."""
        fixed = socket_name(resource_name)
        if not self.instance:
            return fixed
        stem = fixed.removesuffix(".sock")
        name = f"{stem}-{self.instance}.sock"
        if too_long(directory / name) and len(self.instance) > _SHORT_LEN:
            name = f"{stem}-{_short(self.instance)}.sock"
        return name

    def live_siblings(self, resource_name: str, directory: Path, own: str) -> list[str]:
        """Sockets of the same resource, in either naming, that another process serves now (ours left out).

        Asked at stop: when a newer instance serves the resource, the kubelet must not hear our empty list."""
        stem = re.escape(socket_name(resource_name).removesuffix(".sock"))
        pattern = re.compile(rf"{stem}(?:-{_ID_PATTERN})?\.sock\Z")
        try:
            names = sorted(entry.name for entry in directory.iterdir())
        except OSError:  # the directory is gone: nobody serves there
            return []
        return [n for n in names if n != own and pattern.match(n) and served_by_someone(directory / n)]
