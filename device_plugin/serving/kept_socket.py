"""One gRPC server kept at one socket path: bound 0600, re-served when its socket or folder is
removed.

Boundary: one path and its server (bound by serving/bound_socket.py). `keep()` is called by the
owner's poll (any thread; calls are serialised here): when our socket is not at the path any more it
binds a fresh one (creating the folder if `create_folder`), and the old server finishes its calls
for STOP_GRACE_S on its own. Another file at the path is refused and left untouched; the refusal is
logged once, `problem()` says it until the file goes. A socket another process serves is not bound
over (taken_socket.py): keep() looks again only after each backoff delay, and `taken()` says so
meanwhile. `stop()` removes the socket only if it is still ours.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from device_plugin.core.backoff import Backoff
from device_plugin.serving.aio_server import AddServices
from device_plugin.serving.bound_socket import BoundSocket, SocketRefused, bind_fresh
from device_plugin.serving.socket_files import describe_os_error
from device_plugin.serving.taken_socket import TakenSocket

log = logging.getLogger(__name__)

STOP_GRACE_S = 1.0  # how long a replaced server may finish calls it accepted before its socket went
NOT_STARTED = "not served yet"


class KeptSocket:
    def __init__(
        self,
        path: Path,
        label: str,
        add_services: AddServices,
        *,
        create_folder: bool = True,
        taken_by: tuple[str, str] = ("a second copy of this process", "Run one copy per node."),
    ) -> None:
        """`taken_by`: who else likely serves the path, and what to do about it (the one ERROR says
        both)."""
        self.path = path
        self.label = label
        self._add_services = add_services
        self._create_folder = create_folder
        self._lock = threading.Lock()
        self._socket: BoundSocket | None = None
        self._problem = NOT_STARTED  # why nothing of ours is served at the path ("" while it is)
        self.bound = 0  # sockets bound so far (the first one and every re-serve)
        self._taken = TakenSocket(label, path, Backoff(), likely=taken_by[0], remedy=taken_by[1])
        self._look_again = 0.0  # monotonic time of the next look at a path another process serves

    def intact(self) -> bool:
        """Our socket is at the path now (the file there has the inode we bound)."""
        socket = self._socket
        return socket is not None and socket.intact()

    def taken(self) -> str:
        """Why nothing of ours is served: another process serves the path; "" when that is not
        so."""
        return self._taken.waiting()

    def problem(self) -> str:
        """Why this socket is not served as it should be now; "" when it is."""
        with self._lock:
            if self._socket is None:
                return self._problem
        if not self.intact():
            return f"{self.label} socket {self.path} was removed or replaced; serving a fresh one"
        return ""

    def keep(self) -> bool:
        """Serve a fresh socket unless ours is at the path. True when one was bound now."""
        with self._lock:
            if self.intact():
                return False
            # another process serves the path: look only when the backoff says
            if self._taken.waiting():
                now = time.monotonic()
                if now < self._look_again:
                    return False
                if not self._taken.free_again():
                    self._look_again = now + self._taken.next_delay_s()
                    return False
            replaced, self._socket = self._socket, None
            # never bind over another live server: the two would replace each other
            if self._taken.taken():
                self._problem = self._taken.waiting()
                self._look_again = time.monotonic() + self._taken.next_delay_s()
                bound = False
            elif bound := self._bind():
                self._taken.bound()
            # After the bind: the old socket's inode stays in use meanwhile, so the fresh one never
            # reuses it.
            if replaced is not None:
                replaced.server.stop_soon(STOP_GRACE_S)
            return bound

    def _bind(self) -> bool:
        try:
            if self._create_folder:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            bound = bind_fresh(self.path, self.label, self._add_services)
        except SocketRefused as refused:
            return self._refuse(
                f"{refused}: leaving it untouched and not serving the {self.label} socket until it "
                "is gone"
            )
        except OSError as error:
            return self._refuse(
                f"cannot serve the {self.label} socket {self.path}: {describe_os_error(error)}"
            )
        self._socket, self._problem = bound, ""
        self.bound += 1
        if self.bound == 1:
            log.info("%s: serving on %s (mode 0600)", self.label, self.path)
        else:
            log.warning(
                "%s: %s was removed or replaced; serving a fresh socket there",
                self.label,
                self.path,
            )
        return True

    def _refuse(self, problem: str) -> bool:
        if problem != self._problem:  # once per distinct problem: keep() runs every poll
            log.error("%s", problem)
        self._problem = problem
        return False

    def stop(self, grace_s: float, problem: str = "stopped") -> None:
        """Stop serving within about `grace_s`, then remove the socket if it is still ours.

        `problem` is what problem() says until keep() serves again."""
        with self._lock:
            bound, self._socket, self._problem = self._socket, None, problem
        if bound is not None:
            bound.stop(grace_s)
