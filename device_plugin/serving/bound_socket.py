"""One gRPC server bound to a fresh 0600 socket at one path: the one way both front-ends bind a
socket.

Boundary: binding and unbinding one server at one path, nothing about keeping it there. `bind_fresh`
refuses a path held by a file that is not a socket (left untouched) and a bind gRPC refuses; the
socket is bound 0600 whatever the umask (socket_files.bind_private) and its inode remembered, so
`stop()` removes
only our own socket, never a newer one at the path. Who decides when to bind again differs by
contract: the device plugin's lifecycle re-serves and registers again (dp_helper/lifecycle.py); the
DRA driver's sockets are kept at their paths by serving/kept_socket.py, and the kubelet's plugin
watcher sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from device_plugin.serving.aio_server import AddServices, AioSocketServer
from device_plugin.serving.socket_files import (
    bind_private,
    check_not_foreign,
    file_kind,
    inode,
    remove_own_socket,
)


class SocketRefused(Exception):
    """The path holds a file that is not a socket (`foreign`), or gRPC could not bind it; the
    message says which."""

    def __init__(self, message: str, *, foreign: bool) -> None:
        super().__init__(message)
        self.foreign = foreign


@dataclass
class BoundSocket:
    path: Path
    server: AioSocketServer
    inode: int

    def intact(self) -> bool:
        """Our socket is at the path now (the file there has the inode we bound)."""
        return inode(self.path) == self.inode

    def stop(self, grace_s: float) -> bool:
        """Stop serving within about `grace_s`, then remove our socket if it is still ours; True
        when it was."""
        self.server.stop(grace_s)
        return remove_own_socket(self.path, self.inode)


def bind_fresh(path: Path, label: str, add_services: AddServices) -> BoundSocket:
    """Serve `add_services` on a fresh 0600 socket at `path` (its folder must exist).

    SocketRefused: another kind of file holds the path, or gRPC cannot bind it. OSError: the folder
    cannot be used (missing, not a folder, unwritable): the caller decides whether to wait or make
    it."""
    if not check_not_foreign(path):
        raise SocketRefused(f"{path} is {file_kind(path)}, not a socket of ours", foreign=True)
    server = AioSocketServer(f"{label} {path}", add_services)
    try:
        own = bind_private(path.parent, path.name, server.start)
    except RuntimeError as error:
        server.stop(0.0)
        raise SocketRefused(str(error), foreign=False) from error
    except OSError:
        server.stop(0.0)
        raise
    return BoundSocket(path, server, own)
