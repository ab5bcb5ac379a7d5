"""One resource served on its own socket: bind it (mode 0600), stop it, and what the lifecycle keeps.

Boundary: the PluginManager decides when; this module does the binding and the stopping. It knows
the servicer and the socket server by their interfaces (no gRPC import) and the socket file through
device_plugin.serving.socket_files.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from device_plugin.allocation.resources import ResourceManager
from device_plugin.kubelet.servicer import DevicePluginServicer, RpcObserver, SocketServer, StreamEndedCallback
from device_plugin.serving.socket_files import (
    DirectoryUnusable,
    bind_private,
    check_not_foreign,
    describe_os_error,
    remove_own_socket,
)

log = logging.getLogger(__name__)


@dataclass
class Served:
    resource: ResourceManager
    socket_path: Path
    server: SocketServer
    servicer: DevicePluginServicer
    inode: int

    def stop(self, grace_s: float) -> bool:
        """Stop serving within about `grace_s` (open streams end), then remove our socket if it is still ours;
        True when it was (and is now removed)."""
        self.server.stop(grace_s)
        return remove_own_socket(self.socket_path, self.inode)


def serve(
    directory: Path,
    socket_file: str,
    resource: ResourceManager,
    on_stream_ended: StreamEndedCallback,
    observer: RpcObserver | None,
) -> Served | None:
    """Serve `resource` on a fresh 0600 socket `socket_file` in `directory`.

    None (logged) when another file holds the socket's path or gRPC cannot bind; DirectoryUnusable
    when the directory is missing or unwritable (the caller retries)."""
    path = directory / socket_file
    try:
        free = check_not_foreign(path)
    except NotADirectoryError as error:
        raise DirectoryUnusable(error.errno, f"{directory}: {describe_os_error(error)}") from error
    if not free:
        log.error("%s exists and is not a socket; not touching it, not serving %s", path, resource.resource_name)
        return None
    servicer = DevicePluginServicer(resource, on_stream_ended=on_stream_ended, observer=observer)
    server = SocketServer(servicer)
    try:
        own_inode = bind_private(directory, path.name, server.start)
    except RuntimeError as error:
        server.stop(0.0)
        log.error("cannot bind %s for %s: %s", path, resource.resource_name, error)
        return None
    except OSError:
        server.stop(0.0)
        raise
    log.info("%s: serving on %s (mode 0600)", resource.resource_name, path)
    return Served(resource, path, server, servicer, own_inode)
