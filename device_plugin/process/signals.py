"""Signals for `gpu-device-plugin run`: caught from the first moment, and a stop that always ends
the process.

Boundary: stdlib only, and cheap to import, because the CLI installs this before it imports anything
heavy (gRPC, prometheus-client, YAML take a few hundred ms; a SIGHUP in that window used to kill the
process, a SIGINT printed a KeyboardInterrupt traceback). It knows nothing about the daemon: `run`
tells it the phase and gives it a hang-up callback.

How a stop is guaranteed: Python runs signal handlers only on the main thread, between bytecodes, so
a main thread blocked in a read (a FIFO at a config path) or a long C call never runs them. Instead
the C-level handler writes the signal number to a wakeup socket (signal.set_wakeup_fd), and a
watcher thread reads it at once. On SIGTERM/SIGINT the watcher sets `stop` and arms a hard deadline:
if the process still runs `STOP_DEADLINE_S` later it exits by os._exit(1). Before serving there is
nothing to clean up, so a start-up that does not notice the stop within `STARTUP_DEADLINE_S` is
ended with exit 0. A second SIGTERM/SIGINT ends the process at once (exit 1).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from types import FrameType

# after SIGTERM while serving: the graceful stop's budget, under the 5 s promise
STOP_DEADLINE_S = 4.0
# after SIGTERM before serving: nothing is served yet, so nothing to wait for
STARTUP_DEADLINE_S = 1.0
_STOPS = (signal.SIGTERM, signal.SIGINT)

_installed: ProcessSignals | None = None


def install() -> ProcessSignals:
    """Catch SIGTERM, SIGINT and SIGHUP now (main thread only). Idempotent: later calls get the same
    one."""
    global _installed
    if _installed is None:
        _installed = ProcessSignals()
    return _installed


class ProcessSignals:
    def __init__(self) -> None:
        self.stop = threading.Event()
        self.on_hangup: Callable[[], None] | None = None
        self._received: list[str] = []
        self._serving = False
        self._lock = threading.Lock()  # `serving()` and a stop signal: one wins, never half of each
        self._reader, writer = socket.socketpair()
        writer.setblocking(False)
        self._writer = writer  # kept referenced: the C handler writes to its descriptor
        for signum in (*_STOPS, signal.SIGHUP):
            signal.signal(signum, _noted)
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch, name="signals", daemon=True).start()

    @property
    def received(self) -> str:
        """The first stop signal's name, e.g. "SIGTERM"; "" if none yet."""
        return self._received[0] if self._received else ""

    def serving(self) -> bool:
        """About to serve: a stop from now on gets the graceful deadline. False if a stop came
        first."""
        with self._lock:
            if self.stop.is_set():
                return False
            self._serving = True
            return True

    def wait(self) -> str:
        """Block until SIGTERM or SIGINT; the signal's name."""
        while not self.stop.wait(0.5):  # a timeout keeps the main thread responsive
            pass
        return self.received

    def _watch(self) -> None:
        while True:
            data = self._reader.recv(64)
            if not data:
                return
            for signum in data:
                if signum == signal.SIGHUP:
                    self._hangup()
                elif signum in _STOPS:
                    self._stop(signal.Signals(signum).name)

    def _hangup(self) -> None:
        callback = self.on_hangup
        # before serving there is nothing to rescan: start-up reads everything
        if callback is not None:
            callback()

    def _stop(self, name: str) -> None:
        if self._received:
            _exit_now(1, f"second stop signal ({name}); exiting at once")
        with self._lock:
            self._received.append(name)
            self.stop.set()
            serving = self._serving
        deadline_s = STOP_DEADLINE_S if serving else STARTUP_DEADLINE_S
        deadline = threading.Thread(
            target=self._deadline,
            args=(name, deadline_s, serving),
            name="stop-deadline",
            daemon=True,
        )
        deadline.start()

    def _deadline(self, name: str, deadline_s: float, serving: bool) -> None:
        time.sleep(deadline_s)
        if serving:
            _exit_now(
                1,
                f"{name}: the graceful stop did not finish within {deadline_s:g} s; exiting "
                "without it",
            )
        _exit_now(
            0,
            f"{name} during start-up, which is still blocked after {deadline_s:g} s; nothing "
            "served, exiting",
        )


def _noted(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler does nothing: the watcher thread acts on the wakeup byte."""


def _exit_now(code: int, message: str) -> None:
    # os.write, not logging: the main thread may hold the logging lock forever.
    os.write(2, f"gpu-device-plugin: {message}\n".encode())
    os._exit(code)
