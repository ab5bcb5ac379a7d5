"""The project's own double of `nvidia-cuda-mps-control`, for the MPS daemon tests on machines without a GPU.

Boundary: a program of its own (run as `python fake_mps_control.py [-d]`), stdlib only, behaving as the
real one does where our driver relies on it (device_plugin/dra/mps/control_daemon.py lists the facts):
- `-d`: refuses when a daemon already runs for CUDA_MPS_PIPE_DIRECTORY; else detaches (double fork, own
  session), writes `nvidia-cuda-mps-control.pid`, listens on the `control` socket, logs to
  `$CUDA_MPS_LOG_DIRECTORY/control.log` (its start, the GPU it sees, each command), and returns;
- no argument: sends each line of stdin to the daemon and prints the answers; exit status 1 and a
  message when no daemon answers;
- commands: `quit`, `get_server_list`, `set_default_active_thread_percentage N`,
  `get_default_active_thread_percentage`, `set_default_device_pinned_mem_limit DEV LIMIT`,
  `get_default_device_pinned_mem_limit DEV`; anything else is answered as unknown;
- SIGTERM, like `quit`, removes the pid file; SIGKILL leaves it (as the real daemon's would stay).
It starts no MPS server and limits nothing: what it proves is the lifecycle, never isolation.
`program(folder)` writes a launcher for it and returns its path (the `mpsControl` setting takes a program);
`stop_daemons(folder)` kills what a test left running.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

PID_FILE = "nvidia-cuda-mps-control.pid"


def program(folder: Path) -> str:
    """An executable that runs this double with this interpreter; its path."""
    launcher = folder / "nvidia-cuda-mps-control"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


def stop_daemons(folder: Path) -> None:
    """Kill every daemon whose pid file lies under `folder` (a test's end: none left running)."""
    for pid_file in folder.rglob(PID_FILE):
        try:
            os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def _pipe_dir() -> Path:
    return Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps")


def _log(line: str) -> None:
    folder = Path(os.environ.get("CUDA_MPS_LOG_DIRECTORY") or "/var/log/nvidia-mps")
    with (folder / "control.log").open("a", encoding="utf-8") as log:
        log.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {line}\n")


def _running(pipe: Path) -> bool:
    try:
        os.kill(int((pipe / PID_FILE).read_text().strip()), 0)
    except (OSError, ValueError):
        return False
    return True


def _serve(pipe: Path) -> None:
    settings = {"active_thread_percentage": "100.0", "pinned": {}}
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = pipe / "control"
    if path.exists():
        path.unlink()
    server.bind(str(path))
    server.listen(8)
    (pipe / PID_FILE).write_text(f"{os.getpid()}\n")
    _log(f"Startup; CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}")

    def leave(*_: object) -> None:
        (pipe / PID_FILE).unlink(missing_ok=True)
        _log("Shutdown")
        os._exit(0)

    signal.signal(signal.SIGTERM, leave)
    while True:
        connection, _ = server.accept()
        with connection:
            line = connection.makefile("r").readline().strip()
            _log(f"User command: {line}")
            words = line.split()
            if words == ["quit"]:
                connection.sendall(b"\n")
                leave()
            connection.sendall((_answer(words, settings) + "\n").encode())


def _answer(words: list[str], settings: dict) -> str:
    if words == ["get_server_list"]:
        return ""
    if len(words) == 2 and words[0] == "set_default_active_thread_percentage":
        settings["active_thread_percentage"] = f"{float(words[1]):.1f}"
        return settings["active_thread_percentage"]
    if words == ["get_default_active_thread_percentage"]:
        return settings["active_thread_percentage"]
    if len(words) == 3 and words[0] == "set_default_device_pinned_mem_limit":
        settings["pinned"][words[1]] = words[2]
        return ""
    if len(words) == 2 and words[0] == "get_default_device_pinned_mem_limit":
        return settings["pinned"].get(words[1], "0")
    return f"Unrecognized command: {' '.join(words)}"


def _daemon() -> int:
    pipe = _pipe_dir()
    if _running(pipe):
        print("An instance of this daemon is already running", file=sys.stderr)
        return 1
    if os.fork():
        for _ in range(500):  # return once the daemon listens, as the real `-d` is ready when it returns
            if _running(pipe) and (pipe / "control").exists():
                return 0
            time.sleep(0.01)
        return 1
    os.setsid()
    if os.fork():
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        _serve(pipe)
    finally:
        os._exit(1)


def _client() -> int:
    status = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.connect(str(_pipe_dir() / "control"))
                connection.sendall(line.strip().encode() + b"\n")
                answer = connection.makefile("r").read()
        except OSError:
            print("Cannot find MPS control daemon process", file=sys.stderr)
            return 1
        sys.stdout.write(answer)
        if answer.startswith("Unrecognized"):
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(_daemon() if sys.argv[1:] == ["-d"] else _client())
