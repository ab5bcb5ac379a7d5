"""The instance id of a daemon whose sockets are named per instance (socketNames: per-instance), one
rule for both modes: the pod's UID, and in a socket name that UID or, where it would not fit, a
short digest of it.

The id is POD_UID (downward API metadata.uid), lowercased. Anything else is refused (ConfigError
naming gpuDevicePlugin.socketNames): a made-up id would change at every restart, and the sockets of
a crashed instance, which no newcomer may remove while it could still be served, would pile up. A
unix socket path holds at most 108 bytes; where `<stem>-<uid><suffix>` would not fit, `<stem>-<12
hex digits of the UID's SHA-256><suffix>` is used instead (same pod, same name again; unique among a
node's few pods). Both shapes are ours: OUR_ID matches exactly those, so another driver's or
resource's socket that only starts like ours is never taken for one of our instances.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping

from device_plugin.core.errors import ConfigError

POD_UID_ENV = "POD_UID"
SOCKET_NAMES_FIELD = "gpuDevicePlugin.socketNames"
DIGEST_CHARS = 12
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
OUR_ID = rf"(?:{_UUID}|[0-9a-f]{{{DIGEST_CHARS}}})"  # either shape of the id in a socket name


def pod_uid(env: Mapping[str, str]) -> str:
    """POD_UID, lowercased; ConfigError when it is unset or not a pod UID."""
    uid = env.get(POD_UID_ENV, "").strip().lower()
    if not re.fullmatch(_UUID, uid):
        shown = f"{uid[:60]!r}" if uid else "unset"
        raise ConfigError(
            SOCKET_NAMES_FIELD,
            "per-instance needs POD_UID, the pod's UID (downward API fieldRef metadata.uid); it "
            f"is {shown}",
        )
    return uid


def digest(uid: str) -> str:
    return hashlib.sha256(uid.encode()).hexdigest()[:DIGEST_CHARS]


def socket_part(uid: str, fits: Callable[[str], bool]) -> str:
    """The id as it goes into a socket name: the UID when `fits(uid)`, else its digest."""
    return uid if fits(uid) else digest(uid)
