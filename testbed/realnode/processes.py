"""The real node's processes: started with a log file each, stopped by their pid, never left running.

Each program runs in a session of its own, so a stop can signal it and everything it forked that stayed
in its process group. Programs that leave their group on purpose (containerd's shims) are found by
`pids_matching` and stopped by pid too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


class StartFailed(Exception):
    """A program did not come up; the message carries the end of its log."""


@dataclass
class Process:
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} was never started"
        return self.popen.pid

    def start(self, env: dict[str, str] | None = None) -> Process:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env=env,
            )  # fmt: skip
        return self

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 10.0, sig: int = signal.SIGTERM) -> int | None:
        """Signal the process group, wait up to `grace_s`, then SIGKILL it. Returns the exit status."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # what it forked into its group and left behind
        return self.popen.returncode


def free_port() -> int:
    """A loopback TCP port free now (bound and released; the window before its user binds is small)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(what: str, check: Callable[[], bool], timeout_s: float, process: Process | None = None) -> None:
    """Poll `check` every 0.1 s; StartFailed (with the process's log) when it exits or the time is up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if process is not None and not process.running():
            raise StartFailed(f"{process.name} exited while waiting for {what}:\n{process.tail()}")
        time.sleep(0.1)
    log = f":\n{process.tail()}" if process is not None else ""
    raise StartFailed(f"timed out after {timeout_s:.0f} s waiting for {what}{log}")


def https_ok(url: str, context: ssl.SSLContext) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with urllib.request.urlopen(url, context=context, timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    return check


def pids_matching(fragment: str) -> list[int]:
    """Pids whose command line contains `fragment` (e.g. the containerd address its shims were given)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if fragment.encode() in cmdline:
            found.append(int(entry.name))
    return found


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
