"""`gpu-device-plugin kubelet-standin --dir D`: play the kubelet on a directory and print what it
sees.

For trying `gpu-device-plugin run --device-plugin-dir D` (with one's own --config and --machine)
without a cluster: this serves the Registration service on D/kubelet.sock with the project's kubelet
stand-in (device_plugin.standins.kubelet_device_plugin, which behaves like kubelets >= 1.25), and
prints every registration, every device list as it changes (health), and the end of each stream.
With --allocate N it admits one container asking for N devices once the resource's first list
arrives, as the device manager does (GetPreferredAllocation with the free devices in random order,
then Allocate), and prints both answers. It runs until SIGINT or SIGTERM, then stops serving and
removes kubelet.sock.

It refuses a directory where something already answers on kubelet.sock (a real kubelet), and never
deletes the plugins' sockets (a real kubelet does at start; the plugin re-registers on the new
kubelet.sock anyway).
"""

from __future__ import annotations

import argparse
import signal
import socket
import stat
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from device_plugin.commands._view import allocate_summary, health_changes
from device_plugin.core.names import GPU_RESOURCE

NAME = "kubelet-standin"
HELP = (
    "play the kubelet on a device-plugin directory: print registrations, device lists, health; "
    "--allocate N"
)

SETTLE_S = 2.0  # a plugin's resources register within a second of each other
POLL_S = 0.5  # how often the loop looks at the stop flag between changes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        required=True,
        metavar="DIR",
        help="the directory `run --device-plugin-dir` uses (required)",
    )
    parser.add_argument(
        "--allocate", type=int, metavar="N", help="admit one container asking for N devices"
    )
    parser.add_argument(
        "--resource",
        help=f"the resource --allocate asks for (default {GPU_RESOURCE}, else the first "
        "registered)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the random order the devices are offered in (default 0)",
    )


def _answers(path: Path) -> bool:
    """True when something accepts connections on the unix socket `path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def _claim(directory: Path) -> str | None:
    """Why D/kubelet.sock cannot be served (None: it can; a stale socket is removed)."""
    if not directory.is_dir():
        return (
            f"{directory} is not a directory (create it, and give `run --device-plugin-dir` the "
            "same path)"
        )
    sock = directory / "kubelet.sock"
    try:
        mode = sock.lstat().st_mode
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(mode):
        return f"{sock} exists and is not a socket; not touching it"
    if _answers(sock):
        return f"something already serves {sock} (a kubelet?); use another directory"
    sock.unlink()
    print(f"removed a stale {sock.name}", flush=True)
    return None


class _Printer:
    """Prints what is new in the stand-in since the last call: registrations, lists, ended
    streams."""

    def __init__(self, standin: Any) -> None:
        self._standin = standin
        self._calls = 0
        self._lists: dict[int, int] = {}
        self._ended: set[int] = set()

    def changed(self) -> bool:  # called under the stand-in's lock
        return (
            len(self._standin.register_calls) > self._calls
            or any(len(c.lists) > self._lists.get(id(c), 0) for c in self._standin.connections)
            or any(c.stream_ended and id(c) not in self._ended for c in self._standin.connections)
        )

    def report(self) -> None:
        for call in self._standin.register_calls[self._calls :]:
            if call.refusal is None:
                preferred = "yes" if call.options.get_preferred_allocation_available else "no"
                print(
                    f"register: {call.resource_name} endpoint {call.endpoint} version "
                    f"{call.version} "
                    f"(GetPreferredAllocation: {preferred})",
                    flush=True,
                )
            else:
                print(f"register refused: {call.resource_name}: {call.refusal}", flush=True)
            self._calls += 1
        for connection in list(self._standin.connections):
            seen = self._lists.get(id(connection), 0)
            lists = connection.lists[:]
            for number in range(seen, len(lists)):
                listed = lists[number]
                healthy = sum(1 for d in listed if d.health == "Healthy")
                print(
                    f"{connection.resource_name}: list {number + 1}: {len(listed)} devices, "
                    f"{healthy} healthy",
                    flush=True,
                )
                if number == 0:
                    for d in listed:
                        print(
                            f"  {d.id}  {d.health}  NUMA {','.join(map(str, d.numa_nodes)) or '-'}",
                            flush=True,
                        )
                else:
                    for line in health_changes(lists[number - 1], listed):
                        print(f"  {line}", flush=True)
            self._lists[id(connection)] = len(lists)
            if connection.stream_ended and id(connection) not in self._ended:
                self._ended.add(id(connection))
                print(
                    f"{connection.resource_name}: stream ended "
                    f"({connection.stream_error or 'closed'})",
                    flush=True,
                )


def _admit(standin: Any, resource: str, count: int) -> None:
    print(f"allocate {count} x {resource}:", flush=True)
    try:
        admission = standin.admit(resource, count)
    except Exception as error:  # an RPC refusal or too few devices: what the kubelet would report
        details = getattr(error, "details", None)
        print(f"  refused: {details() if callable(details) else error}", flush=True)
        return
    print(f"  offered {len(admission.available)} free devices in random order", flush=True)
    print(
        f"  GetPreferredAllocation -> {', '.join(admission.preferred) or '(no preference)'}",
        flush=True,
    )
    print(f"  Allocate -> {allocate_summary(admission.response)}", flush=True)


def run(args: argparse.Namespace) -> int:
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # First thing, so a signal during start-up is a clean stop too; restored on return (tests call
    # run()).
    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _serve(args, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _serve(args: argparse.Namespace, stop: threading.Event) -> int:
    # deferred: gRPC loads only when serving
    from device_plugin.standins.kubelet_device_plugin import KubeletStandIn

    if args.allocate is not None and args.allocate < 1:
        print("gpu-device-plugin kubelet-standin: --allocate must be at least 1", flush=True)
        return 2
    directory = Path(args.dir).resolve()
    problem = _claim(directory)
    if problem is not None:
        print(f"gpu-device-plugin kubelet-standin: {problem}", flush=True)
        return 2
    standin = KubeletStandIn(directory, seed=args.seed)
    standin.start()
    print(
        f"kubelet stand-in serving {directory / 'kubelet.sock'}; waiting for device plugins "
        "(Ctrl-C stops)",
        flush=True,
    )
    printer = _Printer(standin)
    allocated = args.allocate is None
    if not allocated:
        print(f"--allocate {args.allocate}: {_waiting_for(args.resource)}", flush=True)
    waiting = _Waiting()
    try:
        while not stop.is_set():
            try:
                standin.wait_for(lambda: printer.changed() or stop.is_set(), POLL_S)
                printer.report()
            except TimeoutError:
                # still looked at below: a "not served" note waits for the registrations to settle
                pass
            if not allocated:
                allocated = _try_admit(standin, args, waiting)
    finally:
        standin.stop()
        (directory / "kubelet.sock").unlink(missing_ok=True)
    print("kubelet stand-in stopped", flush=True)
    return 0


def _waiting_for(resource: str | None) -> str:
    if resource is None:
        return (
            f"waiting for the first device list of {GPU_RESOURCE} (or of the first resource that "
            "registers)"
        )
    return f"waiting for the first device list of {resource}"


def _not_served_note(wanted: str, names: list[str]) -> str:
    """Why the wanted resource may never come: the plugin serves other names."""
    why = (
        "MIG resources are served only with migStrategy mixed (nvidia.com/mig-<profile>) in the "
        "plugin's config"
        if wanted.startswith("nvidia.com/mig-")
        else "check the resource name, and the plugin's config (sharing.timeSlicing renames, "
        "migStrategy)"
    )
    return (
        f"{wanted} is not served: the plugin registered {', '.join(names)}; it may never come "
        f"({why})"
    )


class _Waiting:
    """The resources listed so far while the wanted one is not, and since when that set has not
    grown: a plugin registers its resources one after another (under migStrategy mixed,
    nvidia.com/gpu and then each MIG profile), so "not served" is said only once the set has stood
    still for SETTLE_S, and once per new set."""

    def __init__(self) -> None:
        self.names: frozenset[str] = frozenset()
        self.since = time.monotonic()
        self.told: frozenset[str] = frozenset()

    def note_due(self, names: frozenset[str]) -> bool:
        if names != self.names:
            self.names, self.since = names, time.monotonic()
        due = bool(names) and names != self.told and time.monotonic() - self.since >= SETTLE_S
        if due:
            self.told = names
        return due


def _try_admit(standin: Any, args: argparse.Namespace, waiting: _Waiting) -> bool:
    """Admit once the wanted resource's first list is in; True when done (admitted or refused).

    While other resources are listed but not the wanted one, say so once they have settled
    (_Waiting)."""
    ready = [c for c in standin.connections if c.lists and not c.stream_ended]
    names = sorted({c.resource_name for c in ready})
    wanted = args.resource or (
        GPU_RESOURCE if GPU_RESOURCE in names else (names[0] if names else None)
    )
    if wanted is None:
        return False
    if wanted not in names:
        if waiting.note_due(frozenset(names)):
            print(_not_served_note(wanted, names), flush=True)
        return False
    _admit(standin, wanted, args.allocate)
    return True
