"""One GPU's MPS control daemon (`nvidia-cuda-mps-control`): its folders, start, liveness, commands,
stop.

Boundary: processes and files only; no claims, no counting (dra/mps/gpu_daemons.py decides when a
GPU needs its daemon). Each GPU gets its own pipe and log folders under the MPS root, named by its
UUID, and its daemon sees that GPU only (CUDA_VISIBLE_DEVICES=<UUID>): so each GPU's daemon is
separate, and a share's limits name the GPU by UUID. Facts of the real program this relies on (the
project's double,
testbed/fake_mps_control.py, behaves the same):
- `-d` starts the daemon in the background and returns; the daemon writes its pid into
  `<pipe dir>/nvidia-cuda-mps-control.pid` and listens on `<pipe dir>/control` (a unix socket); the
  pid file goes away when it stops, the socket file may stay;
- the same program without `-d`, with the same CUDA_MPS_PIPE_DIRECTORY, sends the commands on its
  stdin to the daemon (one a line) and prints the answers; `quit` stops the daemon;
- a second `-d` on a pipe folder whose daemon runs refuses to start.
A pid is only believed while that process has our pipe folder in its environment (a pid file left by
a daemon killed with SIGKILL may name a pid the kernel has since reused).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from device_plugin.core.short_text import one_line

PID_FILE = "nvidia-cuda-mps-control.pid"
CONTROL_SOCKET = "control"
_UUID = re.compile(r"(GPU|MIG)-[A-Za-z0-9-]{1,80}")


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (a killed daemon nobody reaped yet still has a
    pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: it exists
    try:
        state = (
            Path(f"/proc/{pid}/stat")
            .read_text(encoding="ascii", errors="replace")
            .rpartition(")")[2]
            .split()
        )
    except OSError:
        return False
    return bool(state) and state[0] not in ("Z", "X")


class MpsError(RuntimeError):
    """A daemon that cannot be started, asked or stopped; the message names the GPU and why."""


@dataclass(frozen=True)
class MpsFolders:
    """One GPU's folders under the MPS root."""

    root: Path
    uuid: str

    def __post_init__(self) -> None:
        if not _UUID.fullmatch(self.uuid):  # it names a folder: nothing but a UUID may
            raise MpsError(f"{one_line(self.uuid, 96)} is not a GPU UUID")

    @property
    def pipe_dir(self) -> Path:
        return self.root / self.uuid / "pipe"

    @property
    def log_dir(self) -> Path:
        return self.root / self.uuid / "log"

    @property
    def pid_file(self) -> Path:
        return self.pipe_dir / PID_FILE


class MpsControlDaemon:
    """The control daemon of GPU `uuid`, run with `program` (a path, or a name on PATH)."""

    def __init__(self, program: str, root: Path, uuid: str, *, timeout_s: float = 10.0) -> None:
        self.folders = MpsFolders(root, uuid)
        self._program = program
        self._timeout_s = timeout_s

    @property
    def uuid(self) -> str:
        return self.folders.uuid

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_")}
        env["CUDA_VISIBLE_DEVICES"] = self.uuid
        env["CUDA_MPS_PIPE_DIRECTORY"] = str(self.folders.pipe_dir)
        env["CUDA_MPS_LOG_DIRECTORY"] = str(self.folders.log_dir)
        return env

    def pid(self) -> int | None:
        """The daemon's pid while it runs for our pipe folder; None when it does not."""
        try:
            pid = int(self.folders.pid_file.read_text(encoding="ascii").strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        if not _alive(pid):
            return None
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return pid  # not ours to read (another user): the pid file is all there is to go on
        mine = f"CUDA_MPS_PIPE_DIRECTORY={self.folders.pipe_dir}".encode()
        return pid if mine in environ else None

    def trouble(self) -> str:
        """Why the daemon cannot serve clients now ("" when it can): not running, or its socket
        gone."""
        if self.pid() is None:
            return f"the MPS control daemon of {self.uuid} is not running"
        if not (self.folders.pipe_dir / CONTROL_SOCKET).exists():
            return (
                f"the MPS control daemon of {self.uuid} runs, but its pipe folder "
                f"{self.folders.pipe_dir} is gone"
            )
        return ""

    def start(self) -> int:
        """Start the daemon (a running one is kept) and wait until it answers; its pid. MpsError:
        why not."""
        running = self.pid()
        if running is not None:
            return running
        for folder in (self.folders.pipe_dir, self.folders.log_dir):
            try:
                folder.mkdir(parents=True, exist_ok=True, mode=0o755)
            except OSError as error:
                raise MpsError(
                    f"GPU {self.uuid}: cannot make the MPS folder {folder}: {error}"
                ) from None
        with contextlib.suppress(FileNotFoundError):
            self.folders.pid_file.unlink()  # a dead daemon's: the new one writes its own
        self._run(["-d"], "")
        deadline = time.monotonic() + self._timeout_s
        while time.monotonic() < deadline:
            pid = self.pid()
            if pid is not None and (self.folders.pipe_dir / CONTROL_SOCKET).exists():
                return pid
            time.sleep(0.01)
        raise MpsError(
            f"GPU {self.uuid}: the MPS control daemon did not come up within {self._timeout_s:g} s"
        )

    def command(self, line: str) -> str:
        """Send one command to the running daemon; its answer. MpsError: it did not take it."""
        return self._run([], line + "\n")

    def stop(self) -> None:
        """Stop the daemon (quit, then SIGTERM, then SIGKILL) and wait until it is gone. No-op when
        not running."""
        pid = self.pid()
        if pid is None:
            return
        with contextlib.suppress(MpsError):
            self.command("quit")
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
            if self._gone(pid, self._timeout_s / 3):
                with contextlib.suppress(FileNotFoundError):
                    self.folders.pid_file.unlink()  # a daemon killed outright leaves it
                return
        raise MpsError(f"GPU {self.uuid}: the MPS control daemon (pid {pid}) does not stop")

    def _gone(self, pid: int, within_s: float) -> bool:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if not _alive(pid):
                return True
            time.sleep(0.01)
        return False

    def _run(self, arguments: list[str], stdin: str) -> str:
        try:
            done = subprocess.run(
                [self._program, *arguments],
                input=stdin,
                capture_output=True,
                text=True,
                env=self._environment(),
                timeout=self._timeout_s,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise MpsError(
                f"GPU {self.uuid}: {self._program} {' '.join(arguments)}: {error}"
            ) from None
        if done.returncode != 0:
            said = (
                one_line((done.stderr or done.stdout).strip(), 200)
                or f"exit status {done.returncode}"
            )
            raise MpsError(f"GPU {self.uuid}: {self._program} {' '.join(arguments)}: {said}")
        return done.stdout
