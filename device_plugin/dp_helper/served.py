"""One resource served on its own socket: bind it (mode 0600), stop it, and what the lifecycle
keeps.

Boundary: the PluginManager decides when; the binding and the removal of only our own socket are
device_plugin.serving's (bound_socket.py, the one way both modes bind a socket). This module puts
the resource's servicer on it (no gRPC import).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from device_plugin.dp_helper.served_resource import ServedResource
from device_plugin.dp_helper.servicer import (
    DevicePluginServicer,
    RpcObserver,
    StreamEndedCallback,
    services_of,
)
from device_plugin.serving.bound_socket import BoundSocket, SocketRefused, bind_fresh
from device_plugin.serving.socket_files import DirectoryUnusable, describe_os_error

log = logging.getLogger(__name__)


@dataclass
class Served:
    resource: ServedResource
    bound: BoundSocket
    servicer: DevicePluginServicer

    @property
    def socket_path(self) -> Path:
        return self.bound.path

    @property
    def inode(self) -> int:
        return self.bound.inode

    def stop(self, grace_s: float) -> bool:
        """Stop serving within about `grace_s` (open streams end), then remove our socket if it is
        still ours; True when it was (and is now removed)."""
        self.servicer.shutdown()
        return self.bound.stop(grace_s)


def serve(
    directory: Path,
    socket_file: str,
    resource: ServedResource,
    on_stream_ended: StreamEndedCallback,
    observer: RpcObserver | None,
) -> Served | None:
    """Serve `resource` on a fresh 0600 socket `socket_file` in `directory`.

    None (logged) when another file holds the socket's path or gRPC cannot bind; DirectoryUnusable
    when the directory is missing or unwritable (the caller retries)."""
    path = directory / socket_file
    servicer = DevicePluginServicer(resource, on_stream_ended=on_stream_ended, observer=observer)
    try:
        bound = bind_fresh(path, resource.resource_name, services_of(servicer))
    except SocketRefused as refused:
        if refused.foreign:
            log.error(
                "%s exists and is not a socket; not touching it, not serving %s",
                path,
                resource.resource_name,
            )
        else:
            log.error("cannot bind %s for %s: %s", path, resource.resource_name, refused)
        return None
    except NotADirectoryError as error:
        raise DirectoryUnusable(error.errno, f"{directory}: {describe_os_error(error)}") from error
    log.info("%s: serving on %s (mode 0600)", resource.resource_name, path)
    return Served(resource, bound, servicer)
