"""Where the DRA driver's two kubelet sockets go, and which other instances of the driver serve
beside us.

Boundary: paths and names only (binding and keeping them is grpc_service.py's).
`<kubelet>/plugins_registry/ <driver>-reg.sock` is where the kubelet's plugin watcher finds us;
`<kubelet>/plugins/<driver>/dra.sock` is the endpoint GetInfo names. In rolling-update mode both
carry the instance id (core/instance_id.py: the pod UID, or its digest where the UID would not fit
108 bytes); what still does not fit is refused at start, naming the fix. Only our own names count as
another instance (never a driver whose name begins with ours).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from device_plugin.core.errors import ConfigError
from device_plugin.core.instance_id import OUR_ID, socket_part
from device_plugin.serving.socket_files import served_by_someone, too_long

DRIVER_NAME_FIELD = "gpuDevicePlugin.driverName"


@dataclass(frozen=True)
class SocketPaths:
    registration: Path
    endpoint: Path

    @classmethod
    def for_driver(
        cls, driver_name: str, kubelet_dir: Path = Path("/var/lib/kubelet"), instance: str = ""
    ) -> SocketPaths:
        """The fixed names, or with `instance` (the pod UID: rolling-update mode, kubelet 1.33+) the
        names the kubelet-plugin helper of Kubernetes gives each instance:
        `<driver>-<uid>-reg.sock`, `dra-<uid>.sock`; where either would not fit a unix socket path,
        both carry the UID's 12-digit digest instead (core/instance_id.py; check_socket_paths
        refuses what still does not fit)."""
        registry, folder = kubelet_dir / "plugins_registry", kubelet_dir / "plugins" / driver_name

        def fits(uid: str) -> bool:
            paths = (registry / f"{driver_name}-{uid}-reg.sock", folder / f"dra-{uid}.sock")
            return all(too_long(p) is None for p in paths)

        part = f"-{socket_part(instance, fits)}" if instance else ""
        return cls(registry / f"{driver_name}{part}-reg.sock", folder / f"dra{part}.sock")

    def newest_served(self, driver_name: str) -> Path | None:
        """Of this driver's registration sockets that a live process serves (ours included), the
        newest bound: the one the kubelet registered last, which it sends the claim calls to
        (kubelet 1.33+), and so the one instance that publishes the pool while several serve. Ties
        go to the name, so all agree."""
        served = [p for p in self._ours(driver_name) if served_by_someone(p)]
        stamped = []
        for path in served:
            try:
                stamped.append((path.lstat().st_ctime_ns, path.name, path))
            except OSError:  # gone since: not served
                continue
        return max(stamped)[2] if stamped else None

    def _ours(self, driver_name: str) -> list[Path]:
        ours = re.compile(rf"{re.escape(driver_name)}(?:-{OUR_ID})?-reg\.sock\Z")
        try:
            return sorted(p for p in self.registration.parent.iterdir() if ours.match(p.name))
        except OSError:  # no registry folder: nobody serves there
            return []

    def others_served(self, driver_name: str) -> list[Path]:
        """Registration sockets of other instances of this driver (ours exactly: fixed, or with
        either shape of an instance id; never another driver whose name begins with ours) that a
        live process serves now."""
        return [
            p for p in self._ours(driver_name) if p != self.registration and served_by_someone(p)
        ]


def check_socket_paths(driver_name: str, paths: SocketPaths) -> None:
    """ConfigError naming driverName and the kubelet directory when a socket path is too long to
    bind."""
    kubelet_dir = paths.registration.parent.parent
    per_instance = paths.endpoint.name != "dra.sock"
    for path in (paths.endpoint, paths.registration):
        reason = too_long(path)
        if reason is not None:
            raise ConfigError(
                DRIVER_NAME_FIELD,
                f"{reason}; shorten driverName {driver_name!r} ({len(os.fsencode(driver_name))} "
                "bytes) "
                f"or the kubelet directory {kubelet_dir} (the parent of devicePluginDir; the "
                "kubelet's --root-dir)" + (", or use socketNames fixed" if per_instance else ""),
            )
